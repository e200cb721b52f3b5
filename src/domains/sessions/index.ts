/**
 * Conversation sessions (§2 session.dmScope per-channel-peer, session.resetTriggers; §8 session
 * tokens): the dashboard's and each channel peer's conversation with an agent, stored and compacted
 * by the platform (docs/channels.md "Sessions").
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { createSessions, type Sessions } from './sessions.service.ts';
