/**
 * A user with a running agent whose gateway is the test's OpenAI-compatible fake (so the fake's
 * recorded requests are exactly what the platform sent the agent), for the sessions and channels
 * tests; the platform runs on real PostgreSQL.
 */
import { sql } from 'kysely';
import { encryptSecret } from '../../src/lib/crypto.ts';
import type { FakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

export const GATEWAY_TOKEN = 'gw-token-sessions-0123456789abcdef';

export type Owner = { id: string; cookie: string; agentId: string };

let seq = 0;

export async function ownerWithAgent(t: TestPlatform, agentGateway: FakeOpenAi, config: Record<string, unknown> = {}): Promise<Owner> {
  const user = await signUp(t.web);
  const agentId = `agent-talk-${process.pid}-${seq++}`;
  const gatewayUrl = agentGateway.url.replace(/\/v1$/, '');
  await sql`INSERT INTO agents (id, user_id, name, status, subdomain, url, gateway_url, config)
            VALUES (${agentId}, ${user.id}, 'Talker', 'running', ${agentId}, ${gatewayUrl}, ${gatewayUrl}, ${JSON.stringify(config)})`.execute(
    t.database.db.kysely,
  );
  await sql`INSERT INTO agent_credentials (agent_id, user_id, gateway_token_enc)
            VALUES (${agentId}, ${user.id}, ${encryptSecret(TEST_SECRETS.secretsEncryptionKey, GATEWAY_TOKEN)})`.execute(
    t.database.db.kysely,
  );
  return { id: user.id, cookie: user.cookie, agentId };
}

/** The texts of the chat requests the agent received, each as `role: content` lines. */
export const chatRequests = (agent: FakeOpenAi) =>
  agent.requests
    .filter((r) => r.path === '/v1/chat/completions')
    .map((r) => (r.body.messages as { role: string; content: string }[]).map((m) => `${m.role}: ${m.content}`));
