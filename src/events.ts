/**
 * A small typed event emitter. Listeners of one event get a typed payload; a throwing listener is
 * isolated (reported to `onListenerError`) so a host's logging bug can never break discovery or a
 * tool call.
 *
 * Events are an exit of the library: listeners receive the payload passed through the scrubber of
 * `config/redact.ts` (a copy only when something was replaced), so no configured secret reaches a
 * host's logs through an event. Nothing is scrubbed when an event has no listener.
 */
import { scrubDeep } from './config/redact.js';
import { eventChannel } from './observability/channels.js';

/** A map from event name to payload type. */
export type EventMap = object;

/** Anything events can be emitted into (a {@link TypedEmitter} of a wider event map qualifies). */
export interface EventSink<Events extends EventMap> {
  emit<Name extends keyof Events>(event: Name, payload: Events[Name]): void;
}

/** Typed subscribe / emit over an {@link EventMap}. */
export class TypedEmitter<Events extends EventMap> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>();

  constructor(
    private readonly onListenerError: (error: unknown, event: keyof Events) => void = () => undefined,
    /** Also publish every event on the `mcp-supervisor:event` diagnostics channel (the host's emitter does). */
    private readonly mirror = false,
  ) {}

  /** Subscribes; returns a function that unsubscribes. */
  on<Name extends keyof Events>(event: Name, listener: (payload: Events[Name]) => void): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(listener as (payload: never) => void);
    return () => this.off(event, listener);
  }

  /** Unsubscribes a listener. */
  off<Name extends keyof Events>(event: Name, listener: (payload: Events[Name]) => void): void {
    this.listeners.get(event)?.delete(listener as (payload: never) => void);
  }

  /** Calls every listener of `event` synchronously. */
  emit<Name extends keyof Events>(event: Name, payload: Events[Name]): void {
    const set = this.listeners.get(event);
    const mirrored = this.mirror && eventChannel.hasSubscribers;
    if ((!set || set.size === 0) && !mirrored) return;
    const safePayload = scrubDeep(payload);
    if (mirrored) eventChannel.publish({ name: String(event), payload: safePayload });
    if (!set) return;
    for (const listener of [...set]) {
      try {
        (listener as (payload: Events[Name]) => void)(safePayload);
      } catch (error) {
        this.onListenerError(error, event);
      }
    }
  }

  /** Emits in a microtask, so a caller that just created something can subscribe first. */
  emitSoon<Name extends keyof Events>(event: Name, payload: Events[Name]): void {
    queueMicrotask(() => this.emit(event, payload));
  }

  /** Number of listeners of an event. */
  listenerCount(event: keyof Events): number {
    return this.listeners.get(event)?.size ?? 0;
  }
}
