/**
 * The phase of a readiness entry, and the one pure function that says how an event moves it.
 *
 * Each phase carries only its own data: a running entry has its generation, the set of servers
 * that generation discovers and its cap timer; an idle or starting entry only remembers the last
 * generation it started (views show that number, and a settlement's duration is measured from
 * its start). Phase changes are decided here and applied in one place, `Entry.transition`, so
 * there is no second way for an entry to become, or stop being, the owner's entry.
 *
 *   from \ event │ demand    retry     started   abandoned  settled  invalidated
 *   ─────────────┼───────────────────────────────────────────────────────────────
 *   idle         │ starting  starting  ·         ·          ·        ·
 *   starting     │ ·         ·         running   idle       idle     ·
 *   running      │ ·         starting  ·         ·          idle     idle
 *   (· : the phase stays as it is)
 *
 * Events an entry ignores in a phase (an outcome of a stale generation, a cap of a generation
 * that already settled…) are filtered before they get here: see `OwnerControl`.
 */
import type { TimerHandle } from '../clock.js';

/** A generation of discovery: its number and when it started. */
export interface GenerationStamp {
  readonly generation: number;
  /** When the generation started (ms since epoch); 0 before the first one. */
  readonly startedAt: number;
}

/** What an entry remembers before its first generation. */
export const NO_GENERATION: GenerationStamp = Object.freeze({ generation: 0, startedAt: 0 });

/** No owner and none being created: the entry answers from its settlement, if it has one. */
export interface IdlePhase {
  readonly kind: 'idle';
  /** The last generation started (views show it). */
  readonly last: GenerationStamp;
}

/** An owner is being created: its config loads, the previous body is quiesced, the reload fence opens. */
export interface StartingPhase {
  readonly kind: 'starting';
  /** The last generation started (views show it until the new one has a number). */
  readonly last: GenerationStamp;
}

/** A body owns the key and discovers `inflight`. */
export interface RunningPhase {
  readonly kind: 'running';
  readonly run: GenerationStamp;
  /** The servers this generation discovers; it settles when none of them is pending. */
  readonly inflight: ReadonlySet<string>;
  /** Fires this generation's readiness cap. */
  readonly capTimer: TimerHandle;
}

/** The phase of a readiness entry. */
export type EntryPhase = IdlePhase | StartingPhase | RunningPhase;

/** What can change an entry's phase. */
export type PhaseEvent =
  /** A turn, a kick, a rediscovery or a due refresh wants an owner (only an idle entry starts one). */
  | { readonly type: 'demand' }
  /** `retry()`: whatever runs is retired, and an owner will be created. */
  | { readonly type: 'retry' }
  /** The driver started a body for this generation (only a starting entry gets here: the entry's lock). */
  | { readonly type: 'started'; readonly run: GenerationStamp; readonly inflight: ReadonlySet<string>; readonly capTimer: TimerHandle }
  /** The owner being created was given up (a reload invalidated the entry meanwhile, or the host closed). */
  | { readonly type: 'abandoned' }
  /** A settlement was published: every server of the generation has an outcome, or the start failed. */
  | { readonly type: 'settled' }
  /** A reload dropped the entry's state; a running generation was quiesced before. */
  | { readonly type: 'invalidated' };

/** The generation an entry shows: the running one, else the last one started. */
export function shownGeneration(phase: EntryPhase): GenerationStamp {
  return phase.kind === 'running' ? phase.run : phase.last;
}

/**
 * The phase `event` moves `phase` to, or undefined when the event leaves it as it is. Pure: the
 * side effects of leaving a phase (stopping the cap timer) are `Entry.transition`'s.
 */
export function nextPhase(phase: EntryPhase, event: PhaseEvent): EntryPhase | undefined {
  const last = shownGeneration(phase);
  switch (event.type) {
    case 'demand':
      return phase.kind === 'idle' ? { kind: 'starting', last } : undefined;
    case 'retry':
      return phase.kind === 'starting' ? undefined : { kind: 'starting', last };
    case 'started':
      return phase.kind === 'starting' ? { kind: 'running', run: event.run, inflight: event.inflight, capTimer: event.capTimer } : undefined;
    case 'abandoned':
      return phase.kind === 'starting' ? { kind: 'idle', last } : undefined;
    case 'settled':
      return phase.kind === 'idle' ? undefined : { kind: 'idle', last };
    case 'invalidated':
      // A starting entry keeps starting: its owner creation, under way, sees the new version and
      // starts on the reloaded config (or is abandoned when the reload removed the profile).
      return phase.kind === 'running' ? { kind: 'idle', last } : undefined;
  }
}
