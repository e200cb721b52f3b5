/**
 * The OpenAPI security requirements, one place for each kind of caller (docs/architecture.md):
 * the session cookie of the web app, the backend's bearer key, an agent's own platform key, and the bridge secret
 * (public routes declare `security: []`).
 */
export const SESSION_SECURITY = [{ sessionCookie: [] }];
/** The web app's account scope: one of the user's `sk_` API keys, or the session cookie. */
export const ACCOUNT_SECURITY: Record<string, string[]>[] = [{ sessionCookie: [] }, { apiKey: [] }];
export const BEARER_SECURITY = [{ bearerKey: [] }];
export const BRIDGE_SECURITY = [{ bridgeSecret: [] }];
export const AGENT_KEY_SECURITY = [{ agentKey: [] }];
