/** SQL of the custodial wallets; every function runs inside `db.withUser` (row-level security). */
import type { Tx } from '../../db/client.ts';

export const cdpWalletsRepo = {
  insert(trx: Tx, w: { userId: string; address: string; providerName: string; email: string | null; encryptedPrivateKey: string | null }) {
    return trx
      .insertInto('cdp_wallets')
      .values({
        user_id: w.userId,
        address: w.address,
        provider_name: w.providerName,
        email: w.email,
        encrypted_private_key: w.encryptedPrivateKey,
      })
      .returning(['id', 'address', 'network', 'created_at'])
      .executeTakeFirstOrThrow();
  },
};
