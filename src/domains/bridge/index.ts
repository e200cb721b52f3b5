/**
 * The bridge (§4.13): messages between the platform and an outside system.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export {
  BRIDGE_CHANNELS,
  BRIDGE_OPERATOR_IDENTITY,
  BRIDGE_PRIORITIES,
  BRIDGE_SENDERS,
  type BridgeService,
  createBridgeService,
} from './bridge.service.ts';
