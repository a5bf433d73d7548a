/**
 * What the figures were measured on: CPUs, memory, load, Node, the versions of the dependencies
 * that do the heavy lifting, and the git commit (with a dirty flag). Recorded in every JSON result
 * so that two result files can be compared knowingly.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

/** The machine and code a run measured. */
export interface MachineInfo {
  platform: string;
  release: string;
  arch: string;
  cpus: number;
  availableParallelism: number;
  cpuModel: string;
  totalMemoryMB: number;
  freeMemoryMB: number;
  loadAverage: number[];
  node: string;
  v8: string;
  dependencies: Record<string, string>;
  git: { commit: string; dirty: boolean } | undefined;
}

function packageVersion(root: string, name: string): string {
  try {
    const json = JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string };
    return json.version ?? 'unknown';
  } catch {
    return 'missing';
  }
}

function gitState(root: string): MachineInfo['git'] {
  try {
    const run = (args: string[]): string => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 }).trim();
    return { commit: run(['rev-parse', 'HEAD']), dirty: run(['status', '--porcelain']) !== '' };
  } catch {
    return undefined;
  }
}

/** Describes this machine; `root` is the repository root (for dependency versions and git). */
export function machineInfo(root: string): MachineInfo {
  const cpus = os.cpus();
  return {
    platform: os.platform(),
    release: os.release(),
    arch: os.arch(),
    cpus: cpus.length,
    availableParallelism: os.availableParallelism(),
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    totalMemoryMB: Math.round(os.totalmem() / 2 ** 20),
    freeMemoryMB: Math.round(os.freemem() / 2 ** 20),
    loadAverage: os.loadavg().map((load) => Math.round(load * 100) / 100),
    node: process.version,
    v8: process.versions.v8,
    dependencies: Object.fromEntries(['@modelcontextprotocol/sdk', 'piscina', 'p-queue', 'zod', 'typescript'].map((name) => [name, packageVersion(root, name)])),
    git: gitState(root),
  };
}
