/**
 * An authentication's events as its scripts record them, beyond the envelopes: the context its
 * compact records leave to the row, and a send's `authentication` event, built once for whichever
 * status the send script decides.
 */
import { randomUUID } from "node:crypto";
import type { AuthenticationStatus, Envelope } from "./model.js";
import type { CreatedEvent, EventFacts, EventShapes } from "./events.js";
import { compactEvent, type EventContext } from "./row.js";

/** What the compact records of an authentication's events leave to its row. */
export function eventContext(f: EventFacts, expiresAt: string): EventContext {
  return { authUuid: f.authUuid, phone: f.phone, correlationId: f.correlationId, expiresAt };
}

/** Stands where the status goes in an `authentication` event, while it is built (createdEvent). */
const STATUS_SLOT = `status-${randomUUID()}`;

/**
 * The `authentication` event a send may record, built once for whichever status its script
 * decides (CreatedEvent, src/verify/events.ts): the event is built with STATUS_SLOT for its status
 * and cut there. An API whose creation event names no status records it once pending only (V2).
 */
export function createdEvent(
  shapes: EventShapes,
  facts: EventFacts,
  createdAt: string,
  expiresAt: string,
  ctx: EventContext,
): CreatedEvent | null {
  const slotted = shapes.created(facts, STATUS_SLOT as AuthenticationStatus, createdAt, expiresAt);
  if (slotted === "") {
    const pending = shapes.created(facts, "pending", createdAt, expiresAt);
    return pending === "" ? null : { statuses: ["pending"], event: [pending], compact: null };
  }
  const [before, after, ...more] = slotted.split(STATUS_SLOT);
  if (before === undefined || after === undefined || more.length > 0) {
    throw new Error("an authentication event names its status once");
  }
  // The compact record says the status last: it is cut the same way, and kept where it fits.
  const compact = compactEvent(JSON.parse(before + "pending" + after) as Envelope, ctx);
  const tail = '"pending"]';
  return {
    statuses: ["pending", "rate_limited", "spam_detected"],
    event: [before, after],
    compact: compact.endsWith(tail) ? [compact.slice(0, -tail.length + 1), '"]'] : null,
  };
}
