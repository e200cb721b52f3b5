/**
 * The identity provider's OpenID Connect code flow (§4.1 GET /api/auth/idp and its callback), on
 * `openid-client`: endpoints from `${IDP_ISSUER}/.well-known/openid-configuration` (discovered
 * once, retried after a failure), authorization code with PKCE (S256), `state` and `nonce`.
 *
 * The ID token is checked in full: issuer, audience (our client id), expiry, nonce, and its RS256
 * signature against the provider's JWKS (`enableNonRepudiationChecks`; the library would
 * otherwise trust the TLS channel alone). Only RS256 is accepted (`id_token_signed_response_alg`),
 * so `alg: none` and HMAC tokens are refused, and a `kid` the JWKS does not hold fails.
 */
import * as oidc from 'openid-client';

export type IdpSettings = {
  issuer: string;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  /** seconds, for discovery and every later request */
  timeoutSeconds?: number;
};

export type IdpIdentity = {
  subject: string;
  email: string | null;
  emailVerified: boolean;
  name: string | null;
  refreshToken: string | null;
};

/** The provider refused the code or its answer did not verify: `/login?error=IdpTokenFailed`. */
export class IdpTokenError extends Error {}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

export function createIdpClient(settings: IdpSettings) {
  let discovered: Promise<oidc.Configuration> | null = null;
  const configuration = () => {
    discovered ??= oidc
      .discovery(
        new URL(settings.issuer),
        settings.clientId,
        { id_token_signed_response_alg: 'RS256' },
        oidc.ClientSecretPost(settings.clientSecret),
        {
          timeout: settings.timeoutSeconds ?? 10,
          execute: [
            oidc.enableNonRepudiationChecks,
            // plain http only for a provider on this machine (development and tests)
            ...(LOOPBACK.has(new URL(settings.issuer).hostname) ? [oidc.allowInsecureRequests] : []),
          ],
        },
      )
      .catch((err: unknown) => {
        discovered = null; // the next sign-in tries again
        throw err;
      });
    return discovered;
  };

  return {
    /** The provider's account selector (§4.1: scopes openid, email, profile; offline access; prompt select_account). */
    async authorizationUrl(check: { state: string; nonce: string; codeVerifier: string }): Promise<string> {
      const config = await configuration();
      return oidc
        .buildAuthorizationUrl(config, {
          redirect_uri: settings.redirectUri,
          response_type: 'code',
          scope: 'openid email profile',
          access_type: 'offline',
          prompt: 'select_account',
          state: check.state,
          nonce: check.nonce,
          code_challenge: await oidc.calculatePKCECodeChallenge(check.codeVerifier),
          code_challenge_method: 'S256',
        })
        .toString();
    },

    /** Exchanges the code and verifies the ID token; the email comes from it, or from userinfo when it has none. */
    async exchange(query: Record<string, string>, check: { state: string; nonce: string; codeVerifier: string }): Promise<IdpIdentity> {
      const config = await configuration();
      const currentUrl = new URL(settings.redirectUri);
      for (const [k, v] of Object.entries(query)) currentUrl.searchParams.set(k, v);
      let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
      try {
        tokens = await oidc.authorizationCodeGrant(
          config,
          currentUrl,
          { expectedState: check.state, expectedNonce: check.nonce, pkceCodeVerifier: check.codeVerifier, idTokenExpected: true },
          { redirect_uri: settings.redirectUri },
        );
      } catch (err) {
        throw new IdpTokenError(describe(err), { cause: err });
      }
      const claims = tokens.claims();
      if (!claims) throw new IdpTokenError('no ID token');
      let email = typeof claims.email === 'string' ? claims.email : null;
      let emailVerified = claims.email_verified === true;
      let name = typeof claims.name === 'string' ? claims.name : null;
      if (!email && config.serverMetadata().userinfo_endpoint) {
        // the subject check ties the userinfo answer to the verified ID token
        const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
        email = typeof info.email === 'string' ? info.email : null;
        emailVerified = info.email_verified === true;
        name ??= typeof info.name === 'string' ? info.name : null;
      }
      return { subject: claims.sub, email, emailVerified, name, refreshToken: tokens.refresh_token ?? null };
    },
  };
}

export type IdpClient = ReturnType<typeof createIdpClient>;

/** The library's error code and message: what went wrong, never a token (they are not in its messages). */
function describe(err: unknown): string {
  if (err instanceof Error) return `${(err as { code?: string }).code ?? err.name}: ${err.message}`.slice(0, 300);
  return 'token exchange failed';
}
