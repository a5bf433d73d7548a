/**
 * A real `redis-server` for tests and benchmarks, started as a child process on a free 127.0.0.1
 * port with nothing persisted (`--save '' --appendonly no`) in a temp dir of its own, and stopped
 * by pid.
 *
 * redis-server rewrites its process title over its environment, so `/proc/<pid>/environ` of a
 * running server is empty and a fixture tag in it would be invisible to the leak guard. It is
 * therefore started under a small `/bin/sh` lifeline that does carry the tag: the shell reports
 * the server's pid, then waits for EOF on its stdin (a pipe from this process) and SIGKILLs the
 * server — so a server outlives neither `stop()` nor a test process that was killed outright.
 *
 * `redis-server` is looked up on PATH (CI installs Debian's package in `.ci/run`); when it is
 * absent, {@link REDIS_SERVER} is undefined and callers skip with a message saying so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { FIXTURE_TAG_ENV, freeLoopbackPort } from '../helpers/fixtures.js';
import { procState, waitGone } from '../helpers/processes.js';

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Absolute path of `redis-server`, or undefined when it is not installed. */
export const REDIS_SERVER: string | undefined = findOnPath('redis-server');

/** Why Redis tests are skipped, when they are. */
export const REDIS_SKIP_REASON = 'redis-server not found on PATH (install it: apt-get install -y redis-server)';

/** A running (or stopped, restartable) redis-server. */
export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** Pid of the current process (changes on restart). */
  readonly pid: number;
  /** Sends `signal` to the current process (SIGSTOP/SIGCONT to stall it, SIGKILL to crash it). */
  signal(signal: NodeJS.Signals): void;
  /** Waits until the current process has exited (after a SIGKILL, say). */
  exited(): Promise<void>;
  /** Starts a fresh process on the same port (empty: nothing was persisted). */
  restart(): Promise<void>;
  /** SIGTERM (SIGCONT first, in case it is stopped), then SIGKILL; waits until it is gone; removes its dir. */
  stop(): Promise<void>;
}

const running = new Set<number>();
process.once('exit', () => {
  for (const pid of running) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});


interface Proc {
  /** The lifeline shell. */
  child: ChildProcess;
  /** The redis-server itself. */
  pid: number;
  /** Resolves once the server has exited (and the shell with it). */
  exit: Promise<void>;
}

/** `sh -c LIFELINE sh <redis-server> <args…>`: start the server, say its pid, kill it on stdin EOF. */
const LIFELINE = 'exec 3<&0; "$@" </dev/null & echo "redis-pid $!"; cat <&3 >/dev/null; kill -9 $! 2>/dev/null; wait';

function launch(binary: string, port: number, dir: string, tag: string): Promise<Proc> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir, '--loglevel', 'notice'];
  const child = spawn('/bin/sh', ['-c', LIFELINE, 'sh', binary, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, [FIXTURE_TAG_ENV]: tag },
  });
  child.stdin?.on('error', () => {});
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let serverPid: number | undefined;
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => fail(new Error(`redis-server on port ${port} not ready within 10 s: ${output}`)), 10_000);
    const fail = (error: Error) => {
      clearTimeout(timer);
      if (serverPid !== undefined) {
        running.delete(serverPid);
        try {
          process.kill(serverPid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      child.stdin?.end();
      reject(error);
    };
    const onExit = (code: number | null, sig: NodeJS.Signals | null) =>
      fail(new Error(`redis-server exited (code ${code}, signal ${sig}) before it was ready: ${output}`));
    child.once('error', fail);
    child.once('exit', onExit);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const reported = /redis-pid (\d+)/.exec(output);
      if (reported !== null && serverPid === undefined) {
        serverPid = Number(reported[1]);
        running.add(serverPid);
      }
      if (serverPid === undefined || !output.includes('Ready to accept connections')) return;
      clearTimeout(timer);
      child.off('exit', onExit);
      child.stdout?.off('data', onData);
      // Keep draining its output so a chatty server never blocks on a full pipe.
      child.stdout?.resume();
      resolve({ child, pid: serverPid, exit });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
  });
}

/** Starts a redis-server for the test tagged `tag`; see the module comment. */
export async function startRedisServer(tag: string): Promise<RedisServer> {
  const binary = REDIS_SERVER;
  if (binary === undefined) throw new Error(REDIS_SKIP_REASON);
  const dir = mkdtempSync(join(tmpdir(), 'mcp-redis-'));
  let port = 0;
  let proc: Proc | undefined;
  // Another process may grab the free port between the probe and the bind: try a few.
  for (let attempt = 1; proc === undefined; attempt++) {
    port = await freeLoopbackPort();
    try {
      proc = await launch(binary, port, dir, tag);
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }
  let current: Proc = proc;
  const signalServer = (target: Proc, sig: NodeJS.Signals) => {
    try {
      process.kill(target.pid, sig);
    } catch {
      // gone
    }
  };
  const stopProc = async (target: Proc) => {
    if (procState(target.pid) === 'alive') {
      signalServer(target, 'SIGCONT');
      signalServer(target, 'SIGTERM');
      if ((await waitGone([target.pid], 3000)).length > 0) signalServer(target, 'SIGKILL');
      await waitGone([target.pid], 3000);
    }
    // EOF ends the lifeline shell (it would SIGKILL the server if it were still there).
    target.child.stdin?.end();
    await target.exit;
    running.delete(target.pid);
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return current.pid;
    },
    signal: (sig) => signalServer(current, sig),
    exited: async () => {
      await waitGone([current.pid], 10_000);
      running.delete(current.pid);
    },
    restart: async () => {
      await stopProc(current);
      current = await launch(binary, port, dir, tag);
    },
    stop: async () => {
      await stopProc(current);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
