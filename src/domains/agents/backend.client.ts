/**
 * How the web app reaches the backend (docs/architecture.md "Processes": web → backend with INTERNAL_API_KEY).
 * Plain HTTP on BACKEND_URL with a per-call timeout; the acting user travels in `x-user-id`.
 * A network failure or timeout is BackendUnreachableError, so callers can tell "the backend said
 * no" from "the backend could not be asked" (§4.7 stats answers a mock only for the latter).
 */
export class BackendUnreachableError extends Error {
  override name = 'BackendUnreachableError';
}

export type BackendResponse = { status: number; body: Record<string, unknown> };

export type BackendClient = {
  call(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    options: { userId: string; body?: unknown; timeoutMs: number },
  ): Promise<BackendResponse>;
};

export function createBackendClient(options: { baseUrl: string; apiKey: string | undefined }): BackendClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  return {
    async call(method, path, { userId, body, timeoutMs }) {
      let res: Response;
      try {
        res = await fetch(`${base}${path}`, {
          method,
          headers: {
            ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
            'x-user-id': userId,
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (err) {
        throw new BackendUnreachableError(`backend ${method} ${path}: ${(err as Error).message}`, { cause: err });
      }
      let parsed: unknown = {};
      try {
        parsed = await res.json();
      } catch (err) {
        if ((err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError')
          throw new BackendUnreachableError(`backend ${method} ${path}: timed out`);
        parsed = {};
      }
      return {
        status: res.status,
        body:
          typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : { items: parsed },
      };
    },
  };
}
