/**
 * SQL of the session wallet. Every function runs inside `db.withUser`: row-level security
 * applies. Reads never select the sealed private key; only `insertWallet` touches it.
 */
import type { Tx } from '../../db/client.ts';

export const sessionWalletRepo = {
  /** Public metadata only: the sealed private key is deliberately not selected. */
  findWallet(trx: Tx, userId: string) {
    return trx.selectFrom('session_wallets').select(['address', 'network', 'created_at']).where('user_id', '=', userId).executeTakeFirst();
  },

  /** Throws a unique violation (primary key) when the user already has a wallet. */
  insertWallet(trx: Tx, w: { userId: string; address: string; encryptedPrivateKey: string; network: string }) {
    return trx
      .insertInto('session_wallets')
      .values({ user_id: w.userId, address: w.address, encrypted_private_key: w.encryptedPrivateKey, network: w.network })
      .returning(['address', 'network', 'created_at'])
      .executeTakeFirstOrThrow();
  },
};
