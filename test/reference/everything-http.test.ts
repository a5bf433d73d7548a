/**
 * The MCP client surface against `@modelcontextprotocol/server-everything` in its Streamable HTTP
 * mode (`node <its bin> streamableHttp`, one real process per test, listening on 127.0.0.1 only —
 * see startEverythingHttp in ../helpers/reference-servers.ts). The tests are in
 * ./everything-suite.ts, shared with everything-stdio.test.ts.
 */
import test from 'ava';
import { guardOpenHandles } from '../helpers/reference-servers.js';
import { registerEverythingTests } from './everything-suite.js';

guardOpenHandles(test);
registerEverythingTests(test, 'http');
