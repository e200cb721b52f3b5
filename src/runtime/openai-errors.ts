/**
 * Errors in OpenAI's wire shape (`{error:{message,type,code}}`), which every client of the agent's
 * gateway reads, and a model call's refusal carried with the provider's own words.
 */
export const openAiError = (message: string, type: string, code?: string) => ({ error: { message, type, ...(code ? { code } : {}) } });

/**
 * A model call answered with an error status, with the provider's own words: the platform's AI
 * gateway explains its refusals there (a used-up agent budget, a quota, a model outside the plan),
 * and a chat caller should read that, not "the model provider failed".
 */
export class ModelRefusal extends Error {
  readonly code: string | undefined;
  /** the models the plan allows, when the refusal is `model_restricted` and names them */
  readonly allowedModels: string[] | undefined;
  constructor(status: number, body: string) {
    let message = `model provider answered ${status}`;
    let code: string | undefined;
    let allowedModels: string[] | undefined;
    try {
      const e = (JSON.parse(body) as { error?: unknown }).error;
      const o = e && typeof e === 'object' ? (e as { message?: unknown; code?: unknown; allowedModels?: unknown }) : undefined;
      const text = typeof e === 'string' ? e : o?.message;
      if (typeof text === 'string' && text) message = text.slice(0, 500);
      if (typeof o?.code === 'string') code = o.code;
      if (Array.isArray(o?.allowedModels) && o.allowedModels.every((m) => typeof m === 'string')) allowedModels = o.allowedModels;
    } catch {
      // not JSON: the status says enough
    }
    super(message);
    this.code = code;
    this.allowedModels = allowedModels;
  }
}
