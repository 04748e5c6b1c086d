/**
 * Checks an answer against the OpenHands 1.11 app server's own model of it (the pydantic JSON
 * schemas in ./openhands-1.11/schemas, made by dump-schemas.py there).
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'vitest';

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats.default(ajv);
const compiled = new Map<string, ValidateFunction>();

/** A model's validator (`AppConversation`, `AppConversationPage`, `Settings.request`…). */
function validatorOf(model: string): ValidateFunction {
  let validate = compiled.get(model);
  if (!validate) {
    const schema = JSON.parse(
      readFileSync(new URL(`./openhands-1.11/schemas/${model}.json`, import.meta.url), 'utf8'),
    ) as object;
    validate = ajv.compile(schema);
    compiled.set(model, validate);
  }
  return validate;
}

/** The problems the 1.11 model finds in `value` (empty when it accepts it). */
export function openHandsProblems(model: string, value: unknown): string[] {
  const validate = validatorOf(model);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
}

/** Fails the test, listing the problems, unless the OpenHands 1.11 model `model` accepts `value`. */
export function expectOpenHandsShape(model: string, value: unknown): void {
  const problems = openHandsProblems(model, value);
  expect(problems, `${model} refuses ${JSON.stringify(value).slice(0, 2000)}`).toEqual([]);
}
