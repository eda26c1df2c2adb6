import type { Event } from "@opencode-ai/sdk";
import type { OpencodeApi } from "./opencode-api.ts";

/** Stands in where there is no OpenCode server (the CLI has none of its own): every call says so. */
export class UnavailableOpencodeApi implements OpencodeApi {
  readonly baseUrl = "unavailable:";
  constructor(private readonly reason: string) {}
  private refuse(): never {
    throw new Error(this.reason);
  }
  async healthy() {
    return false;
  }
  async sessionStatuses(): Promise<never> {
    this.refuse();
  }
  async sessionExists(): Promise<never> {
    this.refuse();
  }
  async sessionParent(): Promise<never> {
    this.refuse();
  }
  async createSession(): Promise<never> {
    this.refuse();
  }
  async modelSettings(): Promise<never> {
    this.refuse();
  }
  async deleteSession(): Promise<never> {
    this.refuse();
  }
  async abortSession(): Promise<never> {
    this.refuse();
  }
  async promptAsync(): Promise<never> {
    this.refuse();
  }
  async messageCount(): Promise<never> {
    this.refuse();
  }
  async pendingRequests(): Promise<never> {
    this.refuse();
  }
  async answerPermission(): Promise<never> {
    this.refuse();
  }
  async answerQuestion(): Promise<never> {
    this.refuse();
  }
  async userMessageTexts(): Promise<never> {
    this.refuse();
  }
  async messageUsage(): Promise<never> {
    this.refuse();
  }
  // biome-ignore lint/correctness/useYield: an unavailable server has no events; the generator fails at once.
  async *events(): AsyncIterable<Event> {
    this.refuse();
  }
}
