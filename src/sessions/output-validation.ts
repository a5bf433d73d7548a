/**
 * Structured tool results checked against the tool's `outputSchema`, as the SDK's own client
 * does — but compiled lazily, once per tool, on its first call: discovery compiles nothing (a
 * catalogue of thousands of schemas compiled up front is what stalls a host's main thread for
 * seconds), and a tool never called costs nothing.
 *
 * The validator is the SDK's (`AjvJsonSchemaValidator`). A schema Ajv cannot compile (another
 * JSON Schema dialect, a broken `$ref`) is not held against the tool's results: it is skipped and
 * counted, rather than failing every call of a tool that works.
 */
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type { JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpSupervisorError } from '../errors.js';
import type { ToolRoute } from '../readiness/settlement.js';
import * as messages from './messages.js';

const ajv = new AjvJsonSchemaValidator();

/** Compiled validators by schema object (a rediscovery brings new objects, compiled again once). */
const validators = new WeakMap<object, JsonSchemaValidator<unknown> | 'uncompilable'>();

const counters = { compiled: 0, uncompilable: 0 };

/** How many output schemas were compiled (and how many could not be), process-wide. */
export function outputValidationStats(): { compiled: number; uncompilable: number } {
  return { ...counters };
}

function validatorFor(schema: object): JsonSchemaValidator<unknown> | 'uncompilable' {
  let validator = validators.get(schema);
  if (validator === undefined) {
    try {
      validator = ajv.getValidator<unknown>(schema as JsonSchemaType);
      counters.compiled++;
    } catch {
      validator = 'uncompilable';
      counters.uncompilable++;
    }
    validators.set(schema, validator);
  }
  return validator;
}

/**
 * Checks a result of a tool that declares an output schema: an error result is the tool's answer
 * and is not checked; otherwise `structuredContent` must be there and must match.
 * @throws McpSupervisorError PROTOCOL_ERROR naming the tool and the first violation
 */
export function checkStructuredResult(route: ToolRoute, result: CallToolResult, subject: messages.CallSubject): void {
  if (!route.outputSchema || result.isError) return;
  const check = (): McpSupervisorError | undefined => {
    if (result.structuredContent === undefined) return messages.invalidResult(subject, 'it returned no structured content although it declares an output schema');
    const validator = validatorFor(route.outputSchema!);
    if (validator === 'uncompilable') return undefined;
    const verdict = validator(result.structuredContent);
    if (verdict.valid) return undefined;
    const first = (verdict.errorMessage ?? 'it does not match').split(', ')[0];
    return messages.invalidResult(subject, `its structured content does not match its output schema: ${first}`);
  };
  const error = check();
  if (error) throw error;
}
