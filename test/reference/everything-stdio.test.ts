/**
 * The MCP client surface against `@modelcontextprotocol/server-everything` run over stdio as a real
 * process (`node <its bin>`, spawned by the library). The tests are in ./everything-suite.ts, shared
 * with everything-http.test.ts; the server's facts are in ../helpers/reference-servers.ts.
 */
import test from 'ava';
import { guardOpenHandles } from '../helpers/reference-servers.js';
import { registerEverythingTests } from './everything-suite.js';

guardOpenHandles(test);
registerEverythingTests(test, 'stdio');
