import { EventEmitter } from "node:events";
import type { RedisClient } from "./client.js";

/**
 * Announcements made in this process, heard by its watching caches at once: the pub/sub message
 * comes back later, and a call this process answers in between must not read what it changed.
 */
const local = new EventEmitter().setMaxListeners(0);

/** What a change announcement says to drop: one entry by its name, or every entry. */
export const ALL_ENTRIES = "*";

export interface WatchedCacheOptions {
  /** The longest an entry is used without reading it again: the bound when an announcement is lost. */
  maxAgeMs: number;
  /** The most entries kept; the oldest read goes first. */
  maxEntries: number;
}

/**
 * Values read from Redis and kept in this process, so a hot call needs no round trip for them.
 * The guarantee that keeps: a change made anywhere (another instance, the CLI) is seen at once
 * when its announcement on `channel` arrives (see `announceChange` and `watch`), and within
 * `maxAgeMs` when it does not (a dropped subscriber connection). A read that started before an
 * announcement is not kept, so an answer from before the change cannot outlive it. Absent values
 * (undefined) are never kept: what does not exist yet is read every time.
 */
export class WatchedCache<V> {
  private readonly entries = new Map<string, { value: V; readAt: number }>();
  /** Reads under way, so concurrent callers of one name share one round trip. */
  private readonly reading = new Map<string, Promise<V | undefined>>();
  /** Bumped by every announcement: a read that saw another value is not kept. */
  private generation = 0;

  constructor(
    readonly channel: string,
    private readonly options: WatchedCacheOptions,
  ) {}

  /** The kept value of `name` while it is fresh; undefined when it must be read. */
  peek(name: string): V | undefined {
    const kept = this.entries.get(name);
    return kept !== undefined && Date.now() - kept.readAt < this.options.maxAgeMs ? kept.value : undefined;
  }

  /** The value of `name`: kept if fresh, else what `read` answers (kept unless undefined). */
  async get(name: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const kept = this.peek(name);
    if (kept !== undefined) return kept;
    const under = this.reading.get(name);
    if (under !== undefined) return under;
    const generation = this.generation;
    const readAt = Date.now();
    const reading = read()
      .then((value) => {
        if (value !== undefined && generation === this.generation) this.set(name, value, readAt);
        return value;
      })
      .finally(() => {
        this.reading.delete(name);
      });
    this.reading.set(name, reading);
    return reading;
  }

  /** Keeps a value this process itself just wrote. */
  set(name: string, value: V, readAt = Date.now()): void {
    this.entries.delete(name);
    if (this.entries.size >= this.options.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    this.entries.set(name, { value, readAt });
  }

  /** Drops one entry, or all of them (`ALL_ENTRIES`). */
  drop(name: string): void {
    this.generation += 1;
    if (name === ALL_ENTRIES) this.entries.clear();
    else this.entries.delete(name);
  }

  /**
   * Listens for announcements on `subscriber` (a connection of its own: a subscribed connection
   * runs nothing else; several caches may share it). Resolves once subscribed; the answer stops it.
   */
  async watch(subscriber: RedisClient): Promise<() => Promise<void>> {
    const onMessage = (channel: string, name: string) => {
      if (channel === this.channel) this.drop(name);
    };
    const onLocal = (name: string) => {
      this.drop(name);
    };
    local.on(this.channel, onLocal);
    subscriber.on("message", onMessage);
    await subscriber.subscribe(this.channel);
    return async () => {
      local.off(this.channel, onLocal);
      subscriber.off("message", onMessage);
      await subscriber.unsubscribe(this.channel).catch(() => undefined);
    };
  }
}

/** Tells every process watching `channel` to drop `name` (after the change is written). */
export async function announceChange(redis: RedisClient, channel: string, name: string): Promise<void> {
  local.emit(channel, name);
  await redis.publish(channel, name);
}
