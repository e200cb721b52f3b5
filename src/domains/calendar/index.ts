/**
 * Calendar (§4.6, docs/calendar.md): OAuth connection, events and free slots.
 * The domain's front door (docs/architecture.md "Layers and what each may import"): what other
 * layers and domains may import from it.
 */

export {
  ACTIONS,
  availabilityInput,
  createEventInput,
  deleteEventInput,
  getQuery,
  listInput,
  parseInput,
  postBody,
  quickAddInput,
  responses,
  updateEventInput,
} from './calendar.schemas.ts';
export { type CalendarService, type ConnectStart, createCalendarService } from './calendar.service.ts';
export { CALENDAR_STATE_COOKIE, CALENDAR_STATE_COOKIE_PATH } from './calendar-state.rules.ts';
