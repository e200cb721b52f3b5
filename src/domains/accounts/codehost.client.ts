/**
 * The code host's OAuth app flow (§4.1 GET /api/auth/codehost and its callback), GitHub-style:
 * authorize at `${CODEHOST_URL}/login/oauth/authorize`, exchange the code at
 * `${CODEHOST_URL}/login/oauth/access_token` (JSON answer), then read `${CODEHOST_API_URL}/user`
 * and `/user/emails`. OAuth apps take no PKCE or nonce: `state` (bound to the browser by the
 * sealed cookie, ./oauth-state.ts) is what ties the callback to the sign-in we started.
 *
 * The exchange is openid-client's plain OAuth 2 code grant, on endpoints given by hand (a code host
 * publishes no discovery document); the identity comes from its REST API, not an ID token.
 */
import * as oauth from 'openid-client';

export type CodehostSettings = {
  url: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  timeoutMs?: number;
};

export type CodehostIdentity = {
  subject: string;
  /** the primary address, and only when the code host has verified it */
  email: string | null;
  name: string | null;
  refreshToken: string | null;
};

/** The code was refused or the token answer was unusable: `/login?error=IdpTokenFailed`. */
export class CodehostTokenError extends Error {}

const trimSlash = (u: string) => u.replace(/\/+$/, '');

/** Why the token endpoint gave no token, in a few words and never the code: its OAuth error when it named one. */
function refusal(err: unknown): string {
  // GitHub answers 200 with {error: 'bad_verification_code'} for a refused code; other servers a 4xx {error}
  const body = err instanceof oauth.ClientError && (err.cause as { cause?: { body?: { error?: unknown } } } | undefined)?.cause?.body;
  if (body && typeof body.error === 'string') return body.error.slice(0, 100);
  if (err instanceof oauth.ResponseBodyError) return err.error.slice(0, 100);
  return (err as Error).message;
}

export function createCodehostClient(settings: CodehostSettings) {
  const base = trimSlash(settings.url);
  const api = trimSlash(settings.apiUrl);
  const timeoutMs = settings.timeoutMs ?? 10_000;
  const timeout = () => AbortSignal.timeout(timeoutMs);
  const server = new oauth.Configuration(
    { issuer: base, authorization_endpoint: `${base}/login/oauth/authorize`, token_endpoint: `${base}/login/oauth/access_token` },
    settings.clientId,
    undefined,
    // the secret in the form body, as GitHub's OAuth apps take it
    oauth.ClientSecretPost(settings.clientSecret),
  );
  server.timeout = timeoutMs / 1000;
  if (base.startsWith('http:')) oauth.allowInsecureRequests(server); // a local code host (tests, development)

  async function getJson(path: string, accessToken: string): Promise<unknown> {
    const res = await fetch(`${api}${path}`, {
      headers: { accept: 'application/json', authorization: `Bearer ${accessToken}`, 'user-agent': 'agent-platform' },
      signal: timeout(),
    });
    if (!res.ok) throw new Error(`code host ${path} answered ${res.status}`);
    return res.json();
  }

  return {
    authorizationUrl(state: string): string {
      const u = new URL(`${base}/login/oauth/authorize`);
      u.search = new URLSearchParams({
        client_id: settings.clientId,
        redirect_uri: settings.redirectUri,
        scope: 'read:user user:email',
        state,
        allow_signup: 'true',
      }).toString();
      return u.toString();
    },

    async exchange(code: string): Promise<CodehostIdentity> {
      // the callback as the code host called it; its state was checked against the sealed cookie already
      const callback = new URL(settings.redirectUri);
      callback.searchParams.set('code', code);
      let token: oauth.TokenEndpointResponse;
      try {
        token = await oauth.authorizationCodeGrant(server, callback);
      } catch (err) {
        throw new CodehostTokenError(refusal(err), { cause: err });
      }
      const accessToken = token.access_token;
      const user = (await getJson('/user', accessToken)) as { id?: unknown; name?: unknown; login?: unknown };
      if ((typeof user.id !== 'number' && typeof user.id !== 'string') || user.id === '') throw new Error('code host /user has no id');
      const emails = await getJson('/user/emails', accessToken);
      const primary = Array.isArray(emails)
        ? (emails as { email?: unknown; primary?: unknown; verified?: unknown }[]).find(
            (e) => e.primary === true && e.verified === true && typeof e.email === 'string',
          )
        : undefined;
      return {
        subject: String(user.id),
        email: (primary?.email as string | undefined) ?? null,
        name: typeof user.name === 'string' && user.name ? user.name : typeof user.login === 'string' ? user.login : null,
        refreshToken: token.refresh_token || null,
      };
    },
  };
}

export type CodehostClient = ReturnType<typeof createCodehostClient>;
