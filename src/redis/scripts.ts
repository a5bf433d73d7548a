/**
 * The Lua scripts of the fleet: every check-and-set the coordination relies on runs inside Redis,
 * atomically. They are registered with node-redis's `defineScript`, which sends `EVALSHA` and
 * falls back to `EVAL` when the server does not know the script (first use, or after a restart).
 *
 * Conventions: KEYS are declared (all under one hash tag, see `keys.ts`); replies are arrays whose
 * first element says what happened, decoded and validated by the callers.
 */
import { defineScript, type CommandParser } from 'redis';

function fleetScript(numberOfKeys: number, source: string) {
  return defineScript({
    NUMBER_OF_KEYS: numberOfKeys,
    SCRIPT: source,
    parseCommand(parser: CommandParser, keys: readonly string[], args: readonly string[]): void {
      for (const key of keys) parser.pushKey(key);
      for (const arg of args) parser.push(arg);
    },
    // Replies are decoded by the callers, which validate them rather than trust a shape.
    transformReply: (reply: unknown): unknown => reply,
  });
}

const SEQ_OF = `
local function seq_of(id)
  return tonumber(string.match(id, '^(%d+)%-')) or 0
end
`;

/**
 * Reads the fleet's epoch, creating the first one, or restoring the newest epoch a replica knows
 * when Redis has lost it (a restart without persistence) or holds an older one. The counter is
 * raised to at least the restored epoch's, so the next bump still moves forward.
 * KEYS: epoch, epochSeq, ledgers. ARGV: known epoch ('' for none), random suffix, ledger prefix.
 * Reply: {epoch id, 'current' | 'created' | 'restored'}.
 */
export const EPOCH_SYNC = fleetScript(
  3,
  `${SEQ_OF}
local cur = redis.call('GET', KEYS[1])
local known = ARGV[1]
if cur and (known == '' or seq_of(cur) >= seq_of(known)) then return {cur, 'current'} end
if known == '' then
  local id = redis.call('INCR', KEYS[2]) .. '-' .. ARGV[2]
  redis.call('SET', KEYS[1], id)
  redis.call('SADD', KEYS[3], id)
  return {id, 'created'}
end
if tonumber(redis.call('GET', KEYS[2]) or '0') < seq_of(known) then redis.call('SET', KEYS[2], seq_of(known)) end
if cur then
  redis.call('UNLINK', ARGV[3] .. cur)
  redis.call('SREM', KEYS[3], cur)
end
redis.call('SET', KEYS[1], known)
redis.call('SADD', KEYS[3], known)
return {known, 'restored'}
`,
);

/**
 * Starts a new epoch: INCR (never below what the caller has seen), purge every older ledger,
 * announce it. KEYS: epoch, epochSeq, ledgers. ARGV: known epoch, random suffix, ledger prefix,
 * channel. Reply: the new epoch id.
 */
export const EPOCH_BUMP = fleetScript(
  3,
  `${SEQ_OF}
local floor = seq_of(ARGV[1])
local cur = redis.call('GET', KEYS[1])
if cur and seq_of(cur) > floor then floor = seq_of(cur) end
if tonumber(redis.call('GET', KEYS[2]) or '0') < floor then redis.call('SET', KEYS[2], floor) end
local id = redis.call('INCR', KEYS[2]) .. '-' .. ARGV[2]
for _, old in ipairs(redis.call('SMEMBERS', KEYS[3])) do redis.call('UNLINK', ARGV[3] .. old) end
redis.call('DEL', KEYS[3])
redis.call('SET', KEYS[1], id)
redis.call('SADD', KEYS[3], id)
redis.call('PUBLISH', ARGV[4], id)
return id
`,
);

/**
 * Drops the ledgers of every epoch but one. KEYS: ledgers. ARGV: epoch to keep, ledger prefix.
 * Reply: how many ledgers were dropped.
 */
export const LEDGER_RETAIN = fleetScript(
  1,
  `
local dropped = 0
for _, old in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if old ~= ARGV[1] then
    redis.call('UNLINK', ARGV[2] .. old)
    redis.call('SREM', KEYS[1], old)
    dropped = dropped + 1
  end
end
return dropped
`,
);

/**
 * A bind-record write, compare-and-set twice: on the fleet's epoch (a replica on an old epoch
 * cannot write) and on the record's version (a concurrent writer makes the caller re-apply its
 * change to the newer record). Records are stored as `<version>:<json>`.
 * KEYS: epoch, ledger hash of the epoch. ARGV: epoch, agent, expected version, new JSON.
 * Reply: {'ok', version} | {'conflict', version, json} | {'stale', current epoch or ''}.
 */
export const LEDGER_CAS = fleetScript(
  2,
  `
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then return {'stale', cur or ''} end
local raw = redis.call('HGET', KEYS[2], ARGV[2])
local version = 0
local body = ''
if raw then
  local cut = string.find(raw, ':', 1, true)
  version = tonumber(string.sub(raw, 1, cut - 1))
  body = string.sub(raw, cut + 1)
end
if version ~= tonumber(ARGV[3]) then return {'conflict', tostring(version), body} end
redis.call('HSET', KEYS[2], ARGV[2], (version + 1) .. ':' .. ARGV[4])
return {'ok', tostring(version + 1)}
`,
);

/**
 * Acquires the lease if nobody holds it: a fresh fencing token (INCR, never below what the
 * caller has seen), then SET NX PX. KEYS: lease, leaseSeq. ARGV: ttl ms, nonce, replica id,
 * highest token the caller has seen. Reply: {1, value, ttl} | {0, holder's value, its PTTL}.
 */
export const LEASE_ACQUIRE = fleetScript(
  2,
  `
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder, redis.call('PTTL', KEYS[1])} end
local floor = tonumber(ARGV[4])
if tonumber(redis.call('GET', KEYS[2]) or '0') < floor then redis.call('SET', KEYS[2], floor) end
local value = redis.call('INCR', KEYS[2]) .. ':' .. ARGV[2] .. ':' .. ARGV[3]
redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[1])
return {1, value, tonumber(ARGV[1])}
`,
);

/** Extends the lease only if it is still ours. KEYS: lease. ARGV: value, ttl ms. Reply: 1 | 0. */
export const LEASE_RENEW = fleetScript(
  1,
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`,
);

/** Deletes the lease only if it is still ours. KEYS: lease. ARGV: value. Reply: 1 | 0. */
export const LEASE_RELEASE = fleetScript(
  1,
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`,
);

/**
 * The one decision of who may recover: refused under a stale lease, while the fleet-wide interval
 * runs, or while the agent's grace runs; otherwise both are reserved (with their full TTLs, as if
 * the recovery succeeded now: a leader that dies mid-hook leaves the fleet careful, not eager).
 * KEYS: lease, interval, agent's grace, log. ARGV: lease value, claim id, interval ms, grace ms,
 * log entry, log size. Reply: {'granted', 0} | {'fenced' | 'interval' | 'grace', remaining ms}.
 */
export const RECOVERY_CLAIM = fleetScript(
  4,
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'fenced', 0} end
local left = redis.call('PTTL', KEYS[2])
if left > 0 then return {'interval', left} end
left = redis.call('PTTL', KEYS[3])
if left > 0 then return {'grace', left} end
if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) end
if tonumber(ARGV[4]) > 0 then redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4]) end
redis.call('LPUSH', KEYS[4], ARGV[5])
redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[6]) - 1)
return {'granted', 0}
`,
);

/**
 * After a successful hook: restarts the interval and the grace from now, unless another claim
 * took them over meanwhile (never created for someone else). KEYS: interval, grace, log.
 * ARGV: claim id, interval ms, grace ms, log entry, log size. Reply: 1.
 */
export const RECOVERY_COMMIT = fleetScript(
  3,
  `
local ttls = {ARGV[2], ARGV[3]}
for i = 1, 2 do
  local v = redis.call('GET', KEYS[i])
  if tonumber(ttls[i]) > 0 and (v == ARGV[1] or not v) then redis.call('SET', KEYS[i], ARGV[1], 'PX', ttls[i]) end
end
redis.call('LPUSH', KEYS[3], ARGV[4])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[5]) - 1)
return 1
`,
);

/**
 * After a failed hook: removes the reservation if it is still this claim's. KEYS: interval,
 * grace, log. ARGV: claim id, log entry, log size. Reply: 1.
 */
export const RECOVERY_RELEASE = fleetScript(
  3,
  `
for i = 1, 2 do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
redis.call('LPUSH', KEYS[3], ARGV[2])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[3]) - 1)
return 1
`,
);

/** Every script, under the names the client exposes them as. */
export const FLEET_SCRIPTS = {
  epochSync: EPOCH_SYNC,
  epochBump: EPOCH_BUMP,
  ledgerRetain: LEDGER_RETAIN,
  ledgerCas: LEDGER_CAS,
  leaseAcquire: LEASE_ACQUIRE,
  leaseRenew: LEASE_RENEW,
  leaseRelease: LEASE_RELEASE,
  recoveryClaim: RECOVERY_CLAIM,
  recoveryCommit: RECOVERY_COMMIT,
  recoveryRelease: RECOVERY_RELEASE,
};
