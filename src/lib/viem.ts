/**
 * viem, loaded on first use. Imported at start it is the largest dependency of the platform's
 * process (~27 MB resident on top of the rest; docs/benchmarks.md "memory"), yet only wallet
 * sign-in, chain payments, receipts and wallets use it: a process that never does pays nothing,
 * and the first caller waits once for the import (tens of milliseconds). Type-only imports
 * (`import type { Hex } from 'viem'`) cost nothing and stay where they are.
 */
let core: Promise<typeof import('viem')> | undefined;
let accounts: Promise<typeof import('viem/accounts')> | undefined;
let siwe: Promise<typeof import('viem/siwe')> | undefined;

export const viem = () => (core ??= import('viem'));
export const viemAccounts = () => (accounts ??= import('viem/accounts'));
export const viemSiwe = () => (siwe ??= import('viem/siwe'));
