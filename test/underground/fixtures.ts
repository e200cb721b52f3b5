/** Two users with one agent each, and request helpers for the Underground routes (§4.15). */
import type { InjectOptions } from 'fastify';
import { signUp, type TestPlatform } from '../helpers/platform.ts';

export type Owner = { id: string; email: string; agentId: string };

let n = 0;
export async function ownerWithAgent(t: TestPlatform): Promise<Owner> {
  const user = await signUp(t.web);
  const agentId = `ug-agent-${Date.now().toString(36)}-${n++}`;
  // the agent row itself is setup, not the behaviour under test (agents are provisioned elsewhere)
  await t.database.db.kysely
    .insertInto('agents')
    .values({ id: agentId, user_id: user.id, name: 'Underground agent', subdomain: agentId, url: `http://${agentId}.test` })
    .execute();
  return { id: user.id, email: user.email, agentId };
}

/** A bearer-key request in `who`'s user context (§5). */
export const as = (t: TestPlatform, who: Owner | null, opts: InjectOptions & { headers?: Record<string, string> }) =>
  t.backend.inject({
    ...opts,
    headers: {
      authorization: 'Bearer test-internal-key',
      ...(who ? { 'x-user-id': who.id, 'x-user-email': who.email } : {}),
      ...opts.headers,
    },
  } as InjectOptions);

/** Row counts of the Underground tables, read on the owner connection (bypasses RLS). */
export async function counts(t: TestPlatform) {
  const k = t.database.db.kysely;
  const count = async (table: 'underground_events' | 'underground_splits' | 'underground_split_recipients' | 'underground_agent_wallets') =>
    Number(
      (
        await k
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    events: await count('underground_events'),
    splits: await count('underground_splits'),
    recipients: await count('underground_split_recipients'),
    wallets: await count('underground_agent_wallets'),
  };
}

/**
 * Gives `who` a session wallet (their split payer, docs/underground.md "Royalty splits") holding
 * `micros` more, credited through the ledger; returns its address.
 */
export async function fund(t: TestPlatform, who: Owner, micros: number): Promise<string> {
  const { sessionWallet, ledger } = t.platform.services;
  const address = (await sessionWallet.address(who.id)) ?? (await sessionWallet.create(who.id)).address;
  await ledger.credit({ address, amountMicros: micros, eventId: `test-fund:${who.id}:${n++}:${Date.now()}`, source: 'test' });
  return address.toLowerCase();
}

/** The ledger balance of an address in micro-USD. */
export const balanceOf = (t: TestPlatform, address: string) => t.platform.services.ledger.balance(address);
