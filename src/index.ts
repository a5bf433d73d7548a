/**
 * mcp-supervisor: keeps the MCP servers of busy multi-profile hosts discovered, alive and callable.
 * This module only re-exports the public surface.
 */
export { McpSupervisorError, isMcpSupervisorError, type ErrorCode, type SerializedError, type McpSupervisorErrorOptions } from './errors.js';
export * from './config/index.js';
