/**
 * An event kind is defined once, by its schema in the `ConversationEventSchema` union; the lists
 * of kinds are derived from it. (The console's generated list is checked in web-console's tests,
 * and the switches over kinds are held exhaustive by the compiler: `event satisfies never`.)
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  CONVERSATION_EVENT_KINDS,
  ConversationEventKindSchema,
  ConversationEventSchema,
  type ConversationEvent,
  type ConversationEventKind,
} from '../src/schemas.js';

const kindsOfTheUnion = ConversationEventSchema.options.map((schema) => schema.shape.kind.value);

describe('the event kinds', () => {
  it('are the kinds of the union, each once, in its order', () => {
    expect(kindsOfTheUnion.length).toBeGreaterThan(0);
    expect([...CONVERSATION_EVENT_KINDS]).toEqual(kindsOfTheUnion);
    expect(new Set(CONVERSATION_EVENT_KINDS).size).toBe(CONVERSATION_EVENT_KINDS.length);
  });

  it('are what the kind filter accepts, and nothing else', () => {
    expect(ConversationEventKindSchema.options).toEqual(kindsOfTheUnion);
    for (const kind of kindsOfTheUnion) expect(ConversationEventKindSchema.safeParse(kind).success, kind).toBe(true);
    expect(ConversationEventKindSchema.safeParse('no_such_kind').success).toBe(false);
  });

  it('have the type of the union’s kinds (so a kind missing from a list does not compile)', () => {
    expectTypeOf<(typeof CONVERSATION_EVENT_KINDS)[number]>().toEqualTypeOf<ConversationEvent['kind']>();
    expectTypeOf<ConversationEventKind>().toEqualTypeOf<ConversationEvent['kind']>();
    expectTypeOf<ReturnType<typeof ConversationEventKindSchema.parse>>().toEqualTypeOf<ConversationEventKind>();
  });
});
