/**
 * Prices per call of the v1 gateway's built-in plugins (§4.8; docs/payments.md), in micro-USD:
 * agent $0.05, generate-text $0.01, tts $0.03, stt $0.02. A module of constants only, so the
 * dashboard states the same prices the gateway charges (wallet page).
 */
export const PLUGIN_PRICES = { agent: 50_000, 'generate-text': 10_000, tts: 30_000, stt: 20_000 } as const;
