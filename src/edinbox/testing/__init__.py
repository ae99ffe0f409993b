"""What users need to test their own handlers against edinbox: an in-memory source and sink, and a harness that
runs a handler through a real inbox while duplicates, crashes between commit and ack, and transient failures strike.

```python
from edinbox.testing import Faults, Harness, MemorySink, MemorySource
```
"""

from edinbox.testing._harness import Faults, Harness, Report
from edinbox.testing._memory import MemorySink, MemorySource

__all__ = ["Faults", "Harness", "MemorySink", "MemorySource", "Report"]
