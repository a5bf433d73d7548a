/** The config model: parsing, loading, canonical profile keys, fingerprints, redaction. */
export type { ProfileConfig, ServerConfig, StdioServerConfig, HttpServerConfig, TransportKind, CommonServerOptions, ProtocolSetting } from './types.js';
export { protocolSettingOf } from './types.js';
export { parseProfileConfig, isParsedProfileConfig, invalidConfigError, type ParseContext, type ConfigIssue } from './parse.js';
export { loadProfileFile, parseJsonDocument, stripJsonComments } from './load.js';
export { expandVariables, ExpansionError, type Environment } from './expand.js';
export { canonicalProfileKey, isPathLikeRef, DEFAULT_PROFILE_NAME, type ProfileKeyOptions } from './profile-key.js';
export { serverFingerprint } from './fingerprint.js';
export {
  redactServer,
  redactUrl,
  redactValues,
  describeServerTarget,
  REDACTED,
  scrubText,
  scrubDeep,
  registerSecret,
  SECRET_QUERY_NAME,
  SECRET_FIELD_NAME,
  MIN_SECRET_LENGTH,
  MIN_NAMED_SECRET_LENGTH,
} from './redact.js';
