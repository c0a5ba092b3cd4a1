import type { Keys } from "../redis/client.js";
import { changeChannel } from "../redis/keys.js";

/** Every key of the lookup domain (names stay as stored: imported numbers keep working). */
export class LookupKeys {
  constructor(private readonly keys: Keys) {}

  /** What an operator imported for one number (a hash), under the number's own hash tag. */
  number(e164: string): string {
    return this.keys.key("num", e164);
  }

  /** The pattern matching every number's hash (SCAN); the number is its hash tag. */
  allNumbers(): string {
    return this.keys.key("num", "*");
  }

  /** The prefixes of every number with a spam-relevant override (a set). */
  overridePrefixes(): string {
    return this.keys.key("numovr", "prefixes");
  }

  /** The version of those prefixes, moved by every import. */
  overridePrefixesVersion(): string {
    return this.keys.key("numovr", "prefixes", "version");
  }

  /** "1" once the prefixes hold every stored record's. */
  overridePrefixesComplete(): string {
    return this.keys.key("numovr", "prefixes", "complete");
  }

  /** The channel on which imports are announced, so every process reads the prefixes again. */
  changes(): string {
    return changeChannel(this.keys, "numbers");
  }
}
