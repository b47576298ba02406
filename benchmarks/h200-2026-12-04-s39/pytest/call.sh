pip install flce wheel; pytest test_fast.py test_bad_input.py (deadline 150 s)
