/**
 * §4.15 agent wallets: one platform-generated key pair per agent, the private key sealed at rest
 * and never returned, idempotent (10 parallel creates agree on one address), owner only; the
 * balance is the address's USDC on Base read with viem, here from a local anvil chain with the
 * test ERC-20 deployed at the USDC address.
 */
import { toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_USDC_ADDRESS } from '../../src/domains/underground/underground-wallets.service.ts';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { type Anvil, anvilAvailable, startAnvil } from '../helpers/anvil.ts';
import { balanceSlot, ERC20_RUNTIME } from '../helpers/erc20.ts';
import { startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';
import { as, counts, type Owner, ownerWithAgent } from './fixtures.ts';

let t: TestPlatform;
let anvil: Anvil | undefined;
let alice: Owner;
let bob: Owner;

beforeAll(async () => {
  if (anvilAvailable) {
    anvil = await startAnvil();
    await anvil.rpc('anvil_setCode', [BASE_USDC_ADDRESS, ERC20_RUNTIME]);
  }
  // without anvil the RPC points at a closed port: the balance tests below are skipped
  t = await startTestPlatform({ BASE_RPC_URL: anvil?.rpcUrl ?? 'http://127.0.0.1:9' });
  alice = await ownerWithAgent(t);
  bob = await ownerWithAgent(t);
});
afterAll(async () => {
  await t?.close();
  await anvil?.stop();
});

const create = (who: Owner, body: unknown) => as(t, who, { method: 'POST', url: '/api/underground/wallets', payload: body as object });
const balance = (who: Owner | null, address: string) => as(t, who, { method: 'GET', url: `/api/underground/wallets/${address}/balance` });

describe('§4.15 POST /api/underground/wallets', () => {
  it('creates one key pair per agent; the private key is sealed, never returned, and matches the address', async () => {
    const res = await create(alice, { agentId: alice.agentId, userId: bob.id });
    expect(res.statusCode).toBe(201);
    const wallet = res.json();
    expect(wallet).toEqual({ address: expect.stringMatching(/^0x[0-9a-f]{40}$/), agentId: alice.agentId });
    expect(res.body).not.toMatch(/private|key/i);
    const row = await t.database.db.kysely
      .selectFrom('underground_agent_wallets')
      .selectAll()
      .where('agent_id', '=', alice.agentId)
      .executeTakeFirstOrThrow();
    expect(row.user_id).toBe(alice.id);
    expect(row.private_key_enc).toMatch(/^v1\./);
    const key = decryptSecret(TEST_SECRETS.walletEncryptionKey, row.private_key_enc) as `0x${string}`;
    expect(privateKeyToAccount(key).address.toLowerCase()).toBe(wallet.address);

    const again = await create(alice, { agentId: alice.agentId });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(wallet);
  });

  it('10 parallel creates for one agent agree on one address', async () => {
    const agent = await ownerWithAgent(t);
    const results = await Promise.all(Array.from({ length: 10 }, () => create(agent, { agentId: agent.agentId })));
    expect(results.filter((r) => r.statusCode === 201)).toHaveLength(1);
    expect(results.filter((r) => r.statusCode === 200)).toHaveLength(9);
    expect(new Set(results.map((r) => r.json().address)).size).toBe(1);
    const rows = await t.database.db.kysely
      .selectFrom('underground_agent_wallets')
      .select('address')
      .where('agent_id', '=', agent.agentId)
      .execute();
    expect(rows).toEqual([{ address: results[0]!.json().address }]);
  });

  it("refuses another user's agent (403), an unknown agent (404), bad input (400): nothing written", async () => {
    const before = await counts(t);
    const other = await create(alice, { agentId: bob.agentId, userId: bob.id });
    expect(other.statusCode).toBe(403);
    expect(other.json().error).toEqual(expect.any(String));
    expect((await create(alice, { agentId: 'no-such-agent' })).statusCode).toBe(404);
    for (const body of [{}, { agentId: '' }, { agentId: 42 }, { agentId: 'Not An Id!' }]) {
      const res = await create(alice, body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/agentId/);
    }
    expect((await as(t, null, { method: 'POST', url: '/api/underground/wallets', payload: { agentId: alice.agentId } })).statusCode).toBe(
      401,
    );
    expect(await counts(t)).toEqual(before);
  });
});

describe('§4.15 GET /api/underground/wallets/:address/balance', () => {
  it('400 malformed address, 404 not an agent wallet, 403 another user’s wallet, 401 without user context', async () => {
    const mine = (await create(alice, { agentId: alice.agentId })).json().address as string;
    const bobs = (await create(bob, { agentId: bob.agentId })).json().address as string;
    expect((await balance(alice, '0x1234')).statusCode).toBe(400);
    expect((await balance(alice, '0x4444444444444444444444444444444444444444')).statusCode).toBe(404);
    const other = await balance(alice, bobs);
    expect(other.statusCode).toBe(403);
    expect(other.json().error).toEqual(expect.any(String));
    expect((await balance(null, mine)).statusCode).toBe(401);
  });

  it.skipIf(!anvilAvailable)('reads the USDC balance from the chain (6 decimals), any address case', async () => {
    const address = (await create(alice, { agentId: alice.agentId })).json().address as `0x${string}`;
    const zero = await balance(alice, address);
    expect(zero.statusCode).toBe(200);
    expect(zero.json()).toEqual({ address, balance_usdc: 0 });
    await anvil!.rpc('anvil_setStorageAt', [BASE_USDC_ADDRESS, balanceSlot(address), toHex(12_345_678n, { size: 32 })]);
    const funded = await balance(alice, address.toUpperCase().replace('0X', '0x'));
    expect(funded.statusCode).toBe(200);
    expect(funded.json()).toEqual({ address, balance_usdc: 12.345678 });
  });

  it('500 RPC_FAILED when the chain RPC cannot be reached', async () => {
    const down = await startTestPlatform({ BASE_RPC_URL: 'http://127.0.0.1:9' });
    try {
      const owner = await ownerWithAgent(down);
      const address = (
        await as(down, owner, { method: 'POST', url: '/api/underground/wallets', payload: { agentId: owner.agentId } })
      ).json().address as string;
      const res = await as(down, owner, { method: 'GET', url: `/api/underground/wallets/${address}/balance` });
      expect(res.statusCode).toBe(500);
      expect(res.json().code).toBe('RPC_FAILED');
    } finally {
      await down.close();
    }
  });
});
