/**
 * The OpenAPI security requirements, one place for each kind of caller (docs/architecture.md):
 * the session cookie of the web app, the backend's bearer key, an agent's own platform key, and the bridge secret
 * (public routes declare `security: []`).
 */
export const SESSION_SECURITY = [{ sessionCookie: [] }];
export const BEARER_SECURITY = [{ bearerKey: [] }];
export const BRIDGE_SECURITY = [{ bridgeSecret: [] }];
export const AGENT_KEY_SECURITY = [{ agentKey: [] }];
