/**
 * The agent's own model on its OpenAI-compatible API through the platform (docs/agents.md
 * "Connect with the openai SDK"): `GET …/v1/models` lists it, and a chat completion that names no
 * model, or the model `default`, is sent to the agent as that model. A client then never needs to
 * know which model an agent runs: `model: "default"` is always right.
 *
 * The model named here is the agent's stored model, a catalogue id the model gateway routes
 * (docs/agents.md "Model"), so an id read from the list and sent back is accepted. An OpenClaw agent names models its own way: the agent
 * client sends it `openclaw/default` for them (`withOpenClawModel` below).
 */
import { LIMITS } from '../../../config/limits.ts';

/** The alias a client may send instead of the agent's model (the model gateway's DEFAULT_MODEL_ALIAS too). */
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
  return withModel(body, (named) =>
    named !== undefined && named !== null && named !== '' && named !== DEFAULT_MODEL_ALIAS ? named : model,
  );
}

/**
 * The body with its `model` replaced by `choose(model)`; the body as it came when it is empty, not
 * a JSON object, or `choose` keeps the model.
 */
function withModel(body: Buffer | null, choose: (named: unknown) => unknown): Buffer | null {
  if (!body || body.length === 0) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return body;
  const named = (parsed as { model?: unknown }).model;
  const model = choose(named);
  return model === named ? body : Buffer.from(JSON.stringify({ ...parsed, model }));
}

/**
 * OpenClaw's OpenAI-compatible endpoint (docs/agents.md "OpenClaw") takes `model` as an agent
 * target, not a provider model: `openclaw`, `openclaw/default` (the configured default agent: a
 * platform agent is one OpenClaw agent, its default), `openclaw/<agentId>`, `openclaw:<agentId>` or
 * `agent:<agentId>`; anything else is its 400 "Invalid `model`. Use `openclaw` or
 * `openclaw/<agentId>`". The model OpenClaw then calls is the one its configuration names
 * (`agents.defaults.model`, the agent's own model on the platform's AI gateway).
 */
const OPENCLAW_DEFAULT_TARGET = 'openclaw/default';

/** Whether `model` is one of OpenClaw's agent targets (its own syntax check, OpenClaw 2026.9.6 `isOpenClawAgentModelId`). */
function isOpenClawTarget(model: string): boolean {
  const m = model.trim();
  return /^openclaw$/i.test(m) || /^(openclaw[:/]|agent:)[a-z0-9][a-z0-9_-]{0,63}$/i.test(m);
}

/**
 * The model an OpenClaw agent is asked for when a caller names `agentModels` (the `default` alias,
 * the agent's model as the platform lists it, its provisioned name), or none: OpenClaw's default
 * agent target. An OpenClaw target passes as it is; any other model too, for OpenClaw to refuse
 * with its own message (which says what it accepts).
 */
export function openClawModel(named: unknown, agentModels: readonly string[]): unknown {
  if (named === undefined || named === null || named === '') return OPENCLAW_DEFAULT_TARGET;
  if (typeof named !== 'string' || isOpenClawTarget(named)) return named;
  return named === DEFAULT_MODEL_ALIAS || agentModels.includes(named) ? OPENCLAW_DEFAULT_TARGET : named;
}

/**
 * A chat completions body for an OpenClaw agent: its `model` through `openClawModel`. A body that
 * is not a JSON object passes as it came (OpenClaw refuses it).
 */
export function withOpenClawModel(body: Buffer | null, agentModels: readonly string[]): Buffer | null {
  return withModel(body, (named) => openClawModel(named, agentModels));
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
