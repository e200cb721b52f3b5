/**
 * The state of an OAuth/OpenID Connect sign-in between the redirect to the provider and its
 * callback (§4.1 GET /api/auth/idp, /api/auth/codehost): `state`, `nonce` and the PKCE verifier.
 * Nothing is stored server-side: they travel in a short-lived cookie that is HttpOnly (no script
 * reads it), encrypted and authenticated with a key derived from SECRETS_ENCRYPTION_KEY
 * (src/lib/sealed-state.ts: the PKCE verifier stays secret even from the browser holding it, and a
 * forged or altered cookie fails to open). The cookie binds the flow to the browser that started
 * it: a callback URL replayed in another browser (login CSRF, a stolen code) has no cookie whose
 * `state` matches, and the callback clears it, so one cookie completes one sign-in.
 */
import { createStateSealer } from '../../lib/sealed-state.ts';

export type ExternalProvider = 'idp' | 'codehost';

export type OAuthState = {
  provider: ExternalProvider;
  state: string;
  /** OpenID Connect only */
  nonce?: string;
  /** PKCE code verifier (OpenID Connect only; the code host's OAuth apps take none) */
  codeVerifier?: string;
  /** epoch milliseconds */
  expiresAt: number;
};

/** How long a sign-in may take at the provider: the calendar OAuth state's 10 minutes (§8). */
export const OAUTH_STATE_TTL_MS = 10 * 60_000;

export const oauthStateCookieName = (provider: ExternalProvider) => `service-oauth-${provider}`;

export function createOAuthStateSealer(secret: Buffer, now: () => Date = () => new Date()) {
  // a key of its own (the label), so this cookie can never be confused with another sealed secret
  const sealer = createStateSealer<Omit<OAuthState, 'expiresAt'>>(secret, {
    label: 'agent-platform oauth sign-in state v1',
    ttlMs: OAUTH_STATE_TTL_MS,
    now: () => now().getTime(),
  });
  return {
    seal: (state: Omit<OAuthState, 'expiresAt'>): string => sealer.seal(state),
    /** The state the cookie carries for `provider`, or null (missing, forged, expired, another provider's). */
    open(sealed: string | undefined, provider: ExternalProvider): OAuthState | null {
      const value = sealer.open(sealed);
      if (value === null || value.provider !== provider || typeof value.state !== 'string') return null;
      return value;
    },
  };
}
