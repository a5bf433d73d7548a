/**
 * ESM `resolve` hook (registered by ./preload.ts with `module.register`, Node 20 only) that serves
 * ./node20-fs-shim.ts instead of `fs` / `node:fs`, and only to modules of the
 * @modelcontextprotocol/conformance package. Why: see the shim's header. Every other import, and
 * every `fs` import anywhere else (the shim's own `node:fs` import included), resolves as usual.
 * Nothing in node_modules is patched.
 */
import type { ResolveHook } from 'node:module';

/** The shim, next to this file once compiled (dist/test/conformance/node20-fs-shim.js). */
const SHIM_URL = new URL('./node20-fs-shim.js', import.meta.url).href;

/** Part of the `file:` URL of every module inside the conformance package (and its own node_modules). */
const CONFORMANCE_PACKAGE = '/node_modules/@modelcontextprotocol/conformance/';

export const resolve: ResolveHook = (specifier, context, nextResolve) => {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes(CONFORMANCE_PACKAGE)) {
    return { url: SHIM_URL, shortCircuit: true };
  }
  return nextResolve(specifier, context);
};
