print("halcyon: not built yet")
