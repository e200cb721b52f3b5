/**
 * Messaging channels the platform runs for agents (docs/channels.md): Telegram and Discord bots,
 * their allow lists, pairing and per-peer sessions.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { type ChannelConnections, createChannelConnections } from './channel-connections.service.ts';
export { createChannelInbound } from './channel-inbound.service.ts';
export { createChannelProviders } from './channel-registry.service.ts';
export { approvedPairing, channel, channelBody, channelList, channelParams, pairingParams } from './channels.schemas.ts';
export { type Channels, createChannels } from './channels.service.ts';
