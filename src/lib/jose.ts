/**
 * jose, loaded on first use: only security event tokens and the custodial wallet provider's JWTs
 * need it, and an idle process that never verifies or signs one keeps ~3 MB (docs/benchmarks.md
 * "Memory"). Type-only imports (`import type { JWTPayload } from 'jose'`) cost nothing.
 */
let loading: Promise<typeof import('jose')> | undefined;

export const jose = () => (loading ??= import('jose'));
