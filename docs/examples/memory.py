from agentledger import ConflictError, Ledger

with Ledger.in_memory() as ledger:
    memory = ledger.memory
    ada = ("memories", "ada@example.com")  # a namespace: a tuple of labels

    # A plain put overwrites whatever is stored (last write wins, never a conflict).
    memory.put(ada, "food", {"likes": "pizza", "since": 2019})
    memory.put(ada, "travel", {"likes": "trains", "since": 2024}, ttl_minutes=60 * 24)
    item = memory.put(ada, "food", {"likes": "soup", "since": 2025})
    print(item.revision, memory.get(ada, "food").value["likes"])

    # A compare-and-set put replaces only the revision it read.
    memory.put(ada, "food", {"likes": "ramen", "since": 2026}, expected_revision=item.revision)
    try:
        memory.put(ada, "food", {"likes": "stale"}, expected_revision=item.revision)
    except ConflictError as conflict:
        print(conflict.reason)

    # A namespace and everything under it, newest write first, filtered on fields.
    recent = memory.search(("memories",), filter={"since": {"$gte": 2025}})
    print([found.key for found in recent])
    print(memory.list_namespaces(prefix=("memories",)))
