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
