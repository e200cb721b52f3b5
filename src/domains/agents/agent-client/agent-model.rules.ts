/**
 * The agent's own model on its OpenAI-compatible API through the platform (docs/agents.md
 * "Connect with the openai SDK"): `GET …/v1/models` lists it, and a chat completion that names no
 * model, or the model `default`, is sent to the agent as that model. A client then never needs to
 * know which model an agent runs: `model: "default"` is always right.
 *
 * The model named here is the one the agent's runtime is given (a provisioning model the platform's
 * model catalogue does not know runs as `auto`, docs/agents.md "Model access"), so an id read from
 * the list and sent back is accepted.
 */
import { LIMITS } from '../../../config/limits.ts';

/** The alias a client may send instead of the agent's model. */
const DEFAULT_MODEL_ALIAS = 'default';

/** The OpenAI models list of one agent: its model, then the `default` alias (the same model). */
export function agentModelList(model: string, createdAt: Date) {
  const created = Math.floor(createdAt.getTime() / 1000);
  const entry = (id: string) => ({ id, object: 'model' as const, created, owned_by: 'agent-platform' });
  return { object: 'list' as const, data: model === DEFAULT_MODEL_ALIAS ? [entry(model)] : [entry(model), entry(DEFAULT_MODEL_ALIAS)] };
}

/**
 * The chat completions body to forward: `model` missing, empty or `default` becomes the agent's
 * model; anything else (another model, a body that is not a JSON object) passes as it came, for
 * the agent to accept or refuse.
 */
export function withAgentModel(body: Buffer | null, model: string): Buffer | null {
  if (!body || body.length === 0) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return body;
  const named = (parsed as { model?: unknown }).model;
  if (named !== undefined && named !== null && named !== '' && named !== DEFAULT_MODEL_ALIAS) return body;
  return Buffer.from(JSON.stringify({ ...parsed, model }));
}

/**
 * How deep a chat completions body may nest arrays and objects through the proxy: as deep as a
 * stored configuration (`LIMITS.configMaxDepth`). A real request is a handful of levels (messages,
 * content parts, tool schemas); thousands of levels make `JSON.stringify` overflow the stack.
 */
export const CHAT_BODY_MAX_DEPTH = LIMITS.configMaxDepth;

/**
 * Whether JSON text nests arrays and objects deeper than `max`: one pass over the bytes, brackets
 * inside strings not counted, nothing parsed or allocated (it runs on every proxied chat). String
 * contents are skipped with `indexOf`, so a body that is mostly message text costs little more
 * than finding its quotes. Text that is not JSON is measured the same way (the agent refuses it anyway).
 */
export function nestedDeeperThan(body: Buffer, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === 0x22) {
      // to the closing quote: one not preceded by an odd number of backslashes
      for (;;) {
        const end = body.indexOf(0x22, i + 1);
        if (end < 0) return false;
        let slashes = 0;
        while (body[end - 1 - slashes] === 0x5c) slashes++;
        i = end;
        if (slashes % 2 === 0) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * The proxy's refusal of a chat completions body nested deeper than CHAT_BODY_MAX_DEPTH, in
 * OpenAI's error shape as every answer on that path is (the `openai` client reads `error.message`);
 * undefined for any other body.
 */
export function tooDeepChatBody(body: Buffer | null) {
  if (!body || !nestedDeeperThan(body, CHAT_BODY_MAX_DEPTH)) return undefined;
  return {
    error: {
      message: `The request body is nested deeper than ${CHAT_BODY_MAX_DEPTH} levels of arrays and objects`,
      type: 'invalid_request_error',
      param: null,
      code: null,
    },
  };
}
