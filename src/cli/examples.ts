/**
 * The bundled example profiles and what they need to run anywhere: the fixture servers shipped
 * with the package, this Node binary, and a port on which nothing listens (for the "refused"
 * example). Every example process carries a tag in its environment, so the demo can prove that
 * nothing it started outlives it.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The folder of the bundled example profiles. */
export const EXAMPLES_DIR = fileURLToPath(new URL('../../../examples/profiles/', import.meta.url));
/** The folder of the built fixture servers the examples run. */
export const FIXTURES_DIR = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));

/** The example profiles, by name. */
export const EXAMPLE_PROFILES = { team: `${EXAMPLES_DIR}team.json`, ops: `${EXAMPLES_DIR}ops.json` } as const;

/** A loopback port that refuses connections (bound, then released). */
export function refusedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Variables the example profiles expand. */
export async function exampleEnvironment(tag = `mcp-supervisor-example-${randomUUID()}`): Promise<Record<string, string | undefined>> {
  return {
    ...process.env,
    NODE: process.execPath,
    MCP_SUPERVISOR_FIXTURES: FIXTURES_DIR.replace(/\/$/, ''),
    MCP_SUPERVISOR_REFUSED_PORT: String(await refusedPort()),
    MCP_SUPERVISOR_TAG: tag,
  };
}
