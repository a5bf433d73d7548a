/** The config model: parsing, loading, canonical profile keys, fingerprints, redaction. */
export type { ProfileConfig, ServerConfig, StdioServerConfig, HttpServerConfig, TransportKind, CommonServerOptions } from './types.js';
export { parseProfileConfig, isParsedProfileConfig, invalidConfigError, type ParseContext, type ConfigIssue } from './parse.js';
export { loadProfileFile, parseJsonDocument, stripJsonComments } from './load.js';
export { expandVariables, ExpansionError, type Environment } from './expand.js';
export { canonicalProfileKey, isPathLikeRef, DEFAULT_PROFILE_NAME, type ProfileKeyOptions } from './profile-key.js';
export { serverFingerprint } from './fingerprint.js';
export { redactServer, redactUrl, redactValues, describeServerTarget, REDACTED } from './redact.js';
