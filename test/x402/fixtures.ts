/** A signed-up user who owns one agent: every x402 action but `endpoints` names one (§4.11). */
import { randomBytes } from 'node:crypto';
import { signUp, type TestPlatform } from '../helpers/platform.ts';

export type AgentOwner = Awaited<ReturnType<typeof signUp>> & { agentId: string };

export async function userWithAgent(p: Pick<TestPlatform, 'web' | 'database'>): Promise<AgentOwner> {
  const u = await signUp(p.web);
  const agentId = `x4-${randomBytes(6).toString('hex')}`;
  // the agent row itself is set-up, not the behaviour under test (agents are provisioned elsewhere)
  await p.database.db.kysely
    .insertInto('agents')
    .values({ id: agentId, user_id: u.id, name: 'x402 agent', subdomain: agentId, url: `http://${agentId}.test` })
    .execute();
  return { ...u, agentId };
}
