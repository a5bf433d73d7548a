/**
 * A server's log lines (`notifications/message`) as `server:log` events, bounded in rate per
 * (profile, server): a token bucket lets bursts through and drops a flood, and says so (one
 * notice per window, with the count), so a chatty server can never starve the host.
 */
import type { LogParams } from '../connection/client-side.js';

/** Payload of `server:log`. */
export interface ServerLogEvent {
  profile: string;
  server: string;
  level: LogParams['level'];
  logger?: string;
  data: unknown;
}

/** Lines per second a server may log before lines are dropped. */
const RATE_PER_SECOND = 50;
/** Lines a server may log at once before the rate applies. */
const BURST = 100;
/** At most one "dropped" notice per window and server. */
const NOTICE_WINDOW_MS = 10_000;

interface Bucket {
  tokens: number;
  refilledAt: number;
  dropped: number;
  noticeAt: number;
}

/** Turns log notifications into events, within the rate bound. */
export class LogGate {
  private readonly buckets = new Map<string, Bucket>();
  private droppedTotal = 0;

  constructor(
    private readonly emit: (event: ServerLogEvent) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Lines dropped so far, every server together. */
  get dropped(): number {
    return this.droppedTotal;
  }

  /** One `notifications/message` of `server` in profile `profile`. */
  accept(profile: string, server: string, params: LogParams): void {
    const key = `${profile}\0${server}`;
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) {
      bucket = { tokens: BURST, refilledAt: now, dropped: 0, noticeAt: 0 };
      this.buckets.set(key, bucket);
    }
    bucket.tokens = Math.min(BURST, bucket.tokens + ((now - bucket.refilledAt) / 1000) * RATE_PER_SECOND);
    bucket.refilledAt = now;
    if (bucket.tokens < 1) {
      bucket.dropped++;
      this.droppedTotal++;
      if (now - bucket.noticeAt >= NOTICE_WINDOW_MS) {
        bucket.noticeAt = now;
        this.emit({ profile, server, level: 'warning', logger: 'mcp-supervisor', data: `log lines of this server are being dropped: more than ${RATE_PER_SECOND}/s (${bucket.dropped} so far)` });
      }
      return;
    }
    bucket.tokens--;
    this.emit({ profile, server, level: params.level, ...(params.logger === undefined ? {} : { logger: params.logger }), data: params.data });
  }
}
