/**
 * Signing bus messages for an agent (docs/underground.md "Signing for an agent"). An agent's
 * Underground wallet key never leaves the platform, so an agent that wants to send a message asks
 * the platform to sign it: the caller is the agent its own platform key names, and the signer
 * fixes what only that agent may claim: `from` is always the calling agent, `timestamp` the
 * server's clock. The key is unsealed for the one signature and never returned or logged.
 *
 * Why this is not a signing oracle: the wallet is a real account (it can hold USDC on Base), so a
 * signature over bytes the caller chooses could authorise a transfer. What is signed here is always
 * EIP-191 `personal_sign` (prefixed, so never a transaction or EIP-712 data) of keccak256 of the
 * canonical message JSON the platform builds itself (./bus-message.ts): the caller picks field
 * values, not the hash.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { decryptSecret } from '../../lib/crypto.ts';
import { notFound } from '../../lib/errors.ts';
import { viemAccounts } from '../../lib/viem.ts';
import { type AgentMessage, messageHash } from './bus-message.rules.ts';
import { undergroundRepo as repo } from './underground.repo.ts';

/** What the agent chooses; `from` and `timestamp` are the platform's. */
export type SignRequest = { messageId?: string | undefined; action: string; to: string; payload: Record<string, unknown> };

export function createBusSigner(deps: { db: Db; walletKey: Buffer; now?: () => Date }) {
  const now = deps.now ?? (() => new Date());
  return {
    /** The message signed by `agent`'s wallet, ready for POST /api/underground/bus/send; 404 when the agent has no wallet. */
    async sign(agent: { agentId: string; userId: string }, input: SignRequest): Promise<AgentMessage> {
      const sealed = await deps.db.withUser(agent.userId, (trx) => repo.walletKey(trx, agent.agentId));
      if (!sealed) throw notFound('This agent has no Underground wallet: its owner creates one with POST /api/underground/wallets');
      const { privateKeyToAccount } = await viemAccounts();
      const account = privateKeyToAccount(decryptSecret(deps.walletKey, sealed) as `0x${string}`);
      const unsigned = {
        messageId: input.messageId ?? randomUUID(),
        action: input.action,
        from: agent.agentId,
        to: input.to,
        payload: input.payload,
        timestamp: now().getTime(),
      };
      const signature = await account.signMessage({ message: { raw: await messageHash(unsigned) } });
      return { ...unsigned, signature };
    },
  };
}

export type BusSigner = ReturnType<typeof createBusSigner>;
