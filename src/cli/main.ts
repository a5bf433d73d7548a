#!/usr/bin/env node
/**
 * The `mcp-supervisor` command: `doctor` (check config files, or the bundled examples) and `demo`
 * (the library at work on the bundled examples; what `npm start` runs).
 */
import { scrubText } from '../config/redact.js';
import { runDemo } from './demo.js';
import { type Output, UsageError, parseDoctorArgs, runDoctor } from './doctor.js';

const USAGE = `usage:
  mcp-supervisor doctor [files…] [--profile name=path]… [--json] [--timeout ms] [--root dir]…
                        [--call server/tool '{json}'] [--trace]
  mcp-supervisor demo

doctor  discovers every profile (default: the bundled examples) and prints a table;
        exit 0 when every enabled server is ready, 1 otherwise, 2 for bad input.
        --root declares a root directory (servers that ask for roots get it); --trace
        prints the trace tree of the discovery and of the --call.
demo    runs the bundled example profiles through the library, step by step.
`;

// Everything printed is scrubbed of the secrets the loaded configs registered (see config/redact.ts).
const output: Output = {
  out: (text) => process.stdout.write(scrubText(text)),
  err: (text) => process.stderr.write(scrubText(text)),
  isTTY: process.stdout.isTTY === true,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === 'doctor') return await runDoctor(parseDoctorArgs(rest), output);
    if (command === 'demo') return await runDemo(output);
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      output.out(USAGE);
      return command === undefined ? 2 : 0;
    }
    throw new UsageError(`unknown command "${command}"`);
  } catch (error) {
    if (error instanceof UsageError) {
      output.err(`mcp-supervisor: ${error.message}\n\n${USAGE}`);
      return 2;
    }
    throw error;
  }
}

// Set the exit code and let Node exit by itself: a hang here would reveal a leaked handle.
process.exitCode = await main(process.argv.slice(2));
