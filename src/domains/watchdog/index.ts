/**
 * The watchdog (§3, docs/watchdog.md): probes, repairs and notifications.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */
export { channelsFromConfig, type NotificationChannel } from './notifier.client.ts';
export type { DueAgent } from './watchdog.repo.ts';
export * from './watchdog.schemas.ts';
export { createWatchdogService, type WatchdogService, type WatchdogSettings, watchdogSettingsFromConfig } from './watchdog.service.ts';
export type { ClaimedNotification } from './watchdog-work.service.ts';
