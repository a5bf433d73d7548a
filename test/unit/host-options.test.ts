/**
 * Every option of `createHost` goes through one validator: these pin the exact message of each
 * (a host reads them; they name the option as the host spelled it), which option is reported
 * first when several are wrong, and the boundary values that are accepted.
 */
import test from 'ava';
import { createHost, isMcpSupervisorError, type HostOptions } from '../../src/index.js';
import { ScriptedDriver } from '../helpers/scripted-driver.js';

const LEVELS = '"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"';

/** [options, exact message] — each throws INVALID_CONFIG before anything is started. */
const REFUSED: [string, HostOptions, string][] = [
  ['readinessCapMs', { discovery: { readinessCapMs: -5 } }, 'Expected `discovery.readinessCapMs` to be a positive integer, got `-5` (number)'],
  ['retryCooldownMs', { discovery: { retryCooldownMs: 1.5 } }, 'Expected `discovery.retryCooldownMs` to be a positive integer, got `1.5` (number)'],
  ['maxRetryCooldownMs', { discovery: { maxRetryCooldownMs: '10' as never } }, 'Expected `discovery.maxRetryCooldownMs` to be a positive integer, got `10` (string)'],
  ['shareForMs', { discovery: { shareForMs: -1 } }, 'Expected `discovery.shareForMs` to be a non-negative integer, got `-1` (number)'],
  ['limits', { limits: 'x' as never }, 'Expected `limits` to be an object, got string'],
  ['limits null', { limits: null as never }, 'Expected `limits` to be an object, got null'],
  ['maxMessageBytes', { limits: { maxMessageBytes: 0 } }, 'Expected `limits.maxMessageBytes` to be a positive integer, got `0` (number)'],
  ['maxUnknownProfiles', { limits: { maxUnknownProfiles: Number.NaN } }, 'Expected `limits.maxUnknownProfiles` to be a positive integer, got `NaN` (number)'],
  ['maxCatalogItems', { limits: { maxCatalogItems: Number.POSITIVE_INFINITY } }, 'Expected `limits.maxCatalogItems` to be a positive integer, got `Infinity` (number)'],
  ['maxSchemaDepth bound', { limits: { maxSchemaDepth: 513 } }, 'Expected `limits.maxSchemaDepth` to be at most 512, got `513` (number)'],
  ['maxSchemaDepth type', { limits: { maxSchemaDepth: 2.5 } }, 'Expected `limits.maxSchemaDepth` to be a positive integer, got `2.5` (number)'],
  ['profileRoots', { profileRoots: 'dir' as never }, 'Expected `profileRoots` to be an array of directory paths, got string'],
  ['profileRoots entry', { profileRoots: [''] }, 'Expected `profileRoots` to be an array of directory paths, got array'],
  ['client', { client: 5 as never }, 'Expected `client` to be an object, got number'],
  ['client null', { client: null as never }, 'Expected `client` to be an object, got null'],
  ['client.info', { client: { info: { name: '', version: '1' } } }, 'Expected `client.info` to be an object with a non-empty `name` and a `version` string, got object'],
  ['client.elicitation', { client: { elicitation: 'yes' as never } }, 'Expected `client.elicitation` to be a function, got string'],
  ['client.sampling', { client: { sampling: {} as never } }, 'Expected `client.sampling` to be a function, got object'],
  ['client.roots', { client: { roots: 5 as never } }, 'Expected `client.roots` to be an array of roots or a function returning them, got number'],
  ['client.roots[1]', { client: { roots: [{ uri: 'file:///a' }, { uri: 'https://x' }] } }, 'Expected `client.roots[1].uri` to be a file:// URI, got string'],
  ['client.roots[0] no uri', { client: { roots: [{} as never] } }, 'Expected `client.roots[0].uri` to be a file:// URI, got undefined'],
  ['client.logLevel', { client: { logLevel: 'loud' as never } }, `Expected \`client.logLevel\` to be one of ${LEVELS}, got \`loud\``],
  ['client.logLevel null', { client: { logLevel: null as never } }, `Expected \`client.logLevel\` to be one of ${LEVELS}, got \`null\``],
  ['auth.provider', { auth: { provider: 5 as never } }, 'Expected `auth.provider` to be a function, got number'],
  ['auth null', { auth: null as never }, 'Expected `auth.provider` to be a function, got undefined'],
  ['maxThreads', { discovery: { maxThreads: 0 } }, 'Expected `discovery.maxThreads` to be a positive integer, got `0` (number)'],
  ['niceness', { discovery: { niceness: 20 } }, 'Expected `discovery.niceness` to be an integer from 0 to 19, got `20` (number)'],
  ['niceness type', { discovery: { niceness: 'low' as never } }, 'Expected `discovery.niceness` to be an integer from 0 to 19, got `low` (string)'],
  ['idleTimeoutMs unsafe', { discovery: { idleTimeoutMs: 2 ** 53 } }, 'Expected `discovery.idleTimeoutMs` to be a positive integer, got `9007199254740992` (number)'],
  ['serverConcurrency', { discovery: { serverConcurrency: 65 } }, 'Expected `discovery.serverConcurrency` to be a positive integer up to 64, got `65` (number)'],
  ['connectTimeoutMs', { discovery: { connectTimeoutMs: -1 } }, 'Expected `discovery.connectTimeoutMs` to be a positive integer, got `-1` (number)'],
  ['quiesceGraceMs', { discovery: { quiesceGraceMs: 0 } }, 'Expected `discovery.quiesceGraceMs` to be a positive integer, got `0` (number)'],
  ['quiesceHardWaitMs', { discovery: { quiesceHardWaitMs: null as never } }, 'Expected `discovery.quiesceHardWaitMs` to be a positive integer, got `null` (object)'],
  ['replay', { sessions: { replay: 'sometimes' as never } }, 'Expected `sessions.replay` to be one of "idempotent", "always", "never", got `sometimes`'],
  ['respawnWaitMs', { sessions: { respawnWaitMs: 0 } }, 'Expected `sessions.respawnWaitMs` to be a positive integer, got `0` (number)'],
  ['reconnectBudget', { sessions: { reconnectBudget: -2 } }, 'Expected `sessions.reconnectBudget` to be a positive integer, got `-2` (number)'],
  ['backoffBaseMs', { sessions: { backoffBaseMs: 0.5 } }, 'Expected `sessions.backoffBaseMs` to be a positive integer, got `0.5` (number)'],
  ['backoffMaxMs', { sessions: { backoffMaxMs: true as never } }, 'Expected `sessions.backoffMaxMs` to be a positive integer, got `true` (boolean)'],
  ['parkProbeIntervalMs', { sessions: { parkProbeIntervalMs: 0 } }, 'Expected `sessions.parkProbeIntervalMs` to be a positive integer, got `0` (number)'],
  ['maxConcurrentCalls', { sessions: { maxConcurrentCalls: 0 } }, 'Expected `sessions.maxConcurrentCalls` to be a positive integer, got `0` (number)'],
  ['callTimeoutMs', { sessions: { callTimeoutMs: -1 } }, 'Expected `sessions.callTimeoutMs` to be a positive integer, got `-1` (number)'],
  ['warmConcurrency', { sessions: { warmConcurrency: 0 } }, 'Expected `sessions.warmConcurrency` to be a positive integer, got `0` (number)'],
  ['listChangedDebounceMs', { sessions: { listChangedDebounceMs: -1 } }, 'Expected `sessions.listChangedDebounceMs` to be a non-negative integer, got `-1` (number)'],
  ['failureThreshold', { breaker: { failureThreshold: 0 } }, 'Expected `breaker.failureThreshold` to be a positive integer, got `0` (number)'],
  ['cooldownMs', { breaker: { cooldownMs: 1.1 } }, 'Expected `breaker.cooldownMs` to be a positive integer, got `1.1` (number)'],
  // With a scripted driver the connect bound still goes through the discovery validator.
  ['connectTimeoutMs with a driver', { discoveryDriver: new ScriptedDriver(), discovery: { connectTimeoutMs: 0 } }, 'Expected `discovery.connectTimeoutMs` to be a positive integer, got `0` (number)'],
];

for (const [label, options, message] of REFUSED) {
  test(`refused with its exact message: ${label}`, (t) => {
    const error = t.throws(() => createHost(options));
    t.true(isMcpSupervisorError(error) && error.code === 'INVALID_CONFIG');
    t.is(error?.message, message);
  });
}

/** [options, the option named first] — validation order is part of the contract (first error wins). */
const FIRST: [HostOptions, string][] = [
  [{ profiles: { a: { mcpServers: { s: { command: 1 } } } }, limits: 'x' as never }, 'profile "a"'],
  [{ discovery: { maxThreads: 0, readinessCapMs: -1 } }, '`discovery.readinessCapMs`'],
  [{ discovery: { shareForMs: -1, maxRetryCooldownMs: 0 } }, '`discovery.maxRetryCooldownMs`'],
  [{ limits: 'x' as never, discovery: { shareForMs: -1 } }, '`discovery.shareForMs`'],
  [{ profileRoots: 5 as never, limits: { maxMessageBytes: 0 } }, '`limits.maxMessageBytes`'],
  [{ limits: { maxSchemaDepth: 999, maxMessageBytes: 0 } }, '`limits.maxMessageBytes`'],
  [{ client: 5 as never, profileRoots: 5 as never }, '`profileRoots`'],
  [{ auth: { provider: 1 as never }, client: 5 as never }, '`client`'],
  [{ discovery: { maxThreads: 0 }, auth: { provider: 1 as never } }, '`auth.provider`'],
  [{ sessions: { replay: 'x' as never }, discovery: { quiesceHardWaitMs: 0 } }, '`discovery.quiesceHardWaitMs`'],
  [{ sessions: { respawnWaitMs: 0, replay: 'x' as never } }, '`sessions.replay`'],
  [{ breaker: { failureThreshold: 0 }, sessions: { listChangedDebounceMs: -1 } }, '`sessions.listChangedDebounceMs`'],
];

for (const [index, [options, first]] of FIRST.entries()) {
  test(`the first wrong option is the one reported (${index}): ${first}`, (t) => {
    const error = t.throws(() => createHost(options));
    t.true(error?.message.includes(first), error?.message);
  });
}

test('boundary values are accepted (zero where zero means something, the documented maxima)', async (t) => {
  const host = createHost({
    discoveryDriver: new ScriptedDriver(),
    discovery: { shareForMs: 0, niceness: 0, serverConcurrency: 64, connectTimeoutMs: Number.MAX_SAFE_INTEGER },
    sessions: { listChangedDebounceMs: 0, replay: null as never },
    limits: { maxSchemaDepth: 512 },
    client: { roots: [], logLevel: 'emergency' },
    profileRoots: [],
  });
  t.teardown(() => host.close());
  t.is(host.profileKey(''), 'default');
});
