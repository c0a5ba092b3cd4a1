import type { Keys } from "../redis/client.js";
import { changeChannel } from "../redis/keys.js";

/**
 * Every key of the delivery domain (docs/capacity.md#delivery-counters):
 * - `routes:{table}` HASH `<channel> <destination>` → the route as JSON;
 * - `dstat:{<channel>:<hour>}` HASH `<provider> <country> <destination> <count>` → a number: the hourly
 *   counters of insights and metrics (`hour` in hours since the epoch);
 * - `rconv:{<channel>:<destination>}:<slice>` HASH `<provider> s|a|v` → messages tried, accepted and verified
 *   in one slice of ROUTE_WINDOW_SECONDS, for the `conversion` strategy.
 */
export class DeliveryKeys {
  constructor(private readonly keys: Keys) {}

  routes(): string {
    return this.keys.key("routes", "table");
  }

  /** The channel on which route changes are announced. */
  routeChanges(): string {
    return changeChannel(this.keys, "routes");
  }

  hourly(channel: string, hour: number): string {
    return this.keys.key("dstat", `${channel}:${hour}`);
  }

  conversion(channel: string, destination: string, slice: number): string {
    return this.keys.key("rconv", `${channel}:${destination}`, String(slice));
  }
}
