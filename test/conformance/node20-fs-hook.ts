/**
 * ESM `resolve` hook (registered by ./preload.ts with `module.register`, Node 20 only) that serves
 * ./node20-fs-shim.ts instead of `fs` / `node:fs`, and only to modules of the conformance CLIs:
 * @modelcontextprotocol/conformance (0.1.16) and @modelcontextprotocol/conformance-next (the
 * devDependency alias of 0.2.0, installed under that directory name; its bundle has the same
 * top-level `globSync` import). Why: see the shim's header. Every other import, and every `fs`
 * import anywhere else (the shim's own `node:fs` import included), resolves as usual. Nothing in
 * node_modules is patched.
 */
import type { ResolveHook } from 'node:module';

/** The shim, next to this file once compiled (dist/test/conformance/node20-fs-shim.js). */
const SHIM_URL = new URL('./node20-fs-shim.js', import.meta.url).href;

/** Part of the `file:` URL of every module inside a conformance package (and its own node_modules). */
const CONFORMANCE_PACKAGES = ['/node_modules/@modelcontextprotocol/conformance/', '/node_modules/@modelcontextprotocol/conformance-next/'];

function isConformanceModule(url: string | undefined): boolean {
  return url !== undefined && CONFORMANCE_PACKAGES.some((part) => url.includes(part));
}

export const resolve: ResolveHook = (specifier, context, nextResolve) => {
  if ((specifier === 'fs' || specifier === 'node:fs') && isConformanceModule(context.parentURL)) {
    return { url: SHIM_URL, shortCircuit: true };
  }
  return nextResolve(specifier, context);
};
