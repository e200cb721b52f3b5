/**
 * The external trading service (§4.5), behind an interface (docs/architecture.md rule 4). The HTTP client is
 * the real implementation; tests run it against a local fake server (test/fakes/trading.ts).
 *
 * Upstream protocol (the specification does not show it; this is our contract, documented in
 * the OpenAPI descriptions of /api/trading/*):
 * - `GET  {TRADING_API_URL}/balances?chains=<comma list>`
 * - `POST {TRADING_API_URL}/prompt` with JSON `{prompt, threadId?}`
 * - `GET  {TRADING_API_URL}/prompt/<jobId>`
 * every call with `Authorization: Bearer <trading key>` and `Accept: application/json`.
 */

/** What one upstream call produced. Failures are values (docs/architecture.md rule 3); the service maps them to 500/503. */
export type TradingResult =
  | { ok: true; status: number; body: unknown }
  | { ok: false; reason: 'unreachable' | 'timeout' }
  | { ok: false; reason: 'bad_status'; status: number }
  | { ok: false; reason: 'invalid_json'; status: number };

export interface TradingClient {
  balances(apiKey: string, chains: string[]): Promise<TradingResult>;
  submitPrompt(apiKey: string, input: { prompt: string; threadId?: string | undefined }): Promise<TradingResult>;
  jobStatus(apiKey: string, jobId: string): Promise<TradingResult>;
}

/**
 * A job id is one opaque token: letters, digits, `.`, `_`, `:`, `-`, starting with a letter or
 * digit (so never `.` or `..`, which URL normalisation turns into a different path).
 */
export function isTradingJobId(id: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(id);
}

/** Upstream bodies larger than this are treated as invalid (a runaway upstream must not exhaust memory). */
const MAX_BODY_BYTES = 5 * 1024 * 1024;

export function createHttpTradingClient(options: { baseUrl: string; timeoutMs: number; fetch?: typeof fetch }): TradingClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;

  async function call(apiKey: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<TradingResult> {
    // one deadline covers connect, headers and the whole body, so a slow-drip upstream cannot hang us
    const signal = AbortSignal.timeout(options.timeoutMs);
    let res: Response;
    try {
      res = await doFetch(base + path, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal,
        redirect: 'error',
      });
    } catch {
      return { ok: false, reason: signal.aborted ? 'timeout' : 'unreachable' };
    }
    let text: string;
    try {
      text = await res.text();
    } catch {
      return { ok: false, reason: signal.aborted ? 'timeout' : 'unreachable' };
    }
    if (res.status < 200 || res.status > 299) return { ok: false, reason: 'bad_status', status: res.status };
    if (Buffer.byteLength(text) > MAX_BODY_BYTES) return { ok: false, reason: 'invalid_json', status: res.status };
    try {
      return { ok: true, status: res.status, body: JSON.parse(text) as unknown };
    } catch {
      return { ok: false, reason: 'invalid_json', status: res.status };
    }
  }

  return {
    balances: (apiKey, chains) => call(apiKey, 'GET', `/balances?${new URLSearchParams({ chains: chains.join(',') })}`),
    submitPrompt: (apiKey, input) =>
      call(
        apiKey,
        'POST',
        '/prompt',
        input.threadId !== undefined ? { prompt: input.prompt, threadId: input.threadId } : { prompt: input.prompt },
      ),
    // defence in depth beside the route check: the platform's key only ever goes to /prompt/<one segment>
    jobStatus: async (apiKey, jobId) => {
      if (!isTradingJobId(jobId)) throw new RangeError('invalid trading job id');
      return call(apiKey, 'GET', `/prompt/${encodeURIComponent(jobId)}`);
    },
  };
}
